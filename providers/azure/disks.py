"""Managed disks for zoned volumes: create-or-get (idempotent), delete (refusing attached disks), PV labels.

A disk's name is derived from the claim's UID (``pvc-<uid>``), so a retry, or a second provisioner
after a crash, finds the disk the first one made instead of creating another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cloudzones import errors
from cloudzones.topology import Topology, is_availability_zone, make_zone, normalize_region, zone_id
from providers.azure import resource_ids
from providers.azure.compute import ComputeApi, Disk

PLACEHOLDER = "placeholder-for-provisioning"
"""The disk name Kubernetes uses for a PV whose disk does not exist yet (k8s.io/cloud-provider/volume)."""
CSI_DRIVER = "disk.csi.azure.com"
ZONE_REDUNDANT_SKUS = frozenset({"Premium_ZRS", "StandardSSD_ZRS"})

# ARM error codes worth a plainer sentence than ARM's own.
_HINTS = {
    "QuotaExceeded": "the subscription's disk quota in this region is used up",
    "OperationNotAllowed": "Azure does not allow this disk here (a ZRS SKU in a zone, or a quota limit)",
    "ZonalAllocationFailed": "the zone has no capacity for this disk SKU right now",
    "SkuNotAvailable": "this disk SKU is not offered in that region or zone",
    "InvalidParameter": "Azure rejected a disk parameter",
}


def disk_name_for_claim(pvc: Mapping[str, Any]) -> str:
    """``pvc-<uid>``: stable across retries and provisioner restarts."""
    uid = str((pvc.get("metadata") or {}).get("uid") or "")
    if not uid:
        raise errors.CloudZonesError("the PersistentVolumeClaim has no metadata.uid; cannot name its disk stably")
    return f"pvc-{uid}"


def disk_body(*, location: str, size_gib: int, sku: str, zone: str | None, tags: Mapping[str, str]) -> dict[str, Any]:
    """The ARM request body of an empty managed disk (``zone`` is the zone id, ``"1"``, or None)."""
    body: dict[str, Any] = {
        "location": location,
        "sku": {"name": sku},
        "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": size_gib},
        "tags": dict(tags),
    }
    if zone is not None:
        body["zones"] = [zone]
    return body


def disk_zone_label(disk: Disk) -> str | None:
    """The zone label of a disk (``westus2-1``), or None for an unzoned or zone-redundant disk."""
    if not disk.zones:
        return None
    try:
        return make_zone(disk.location, disk.zones[0])
    except errors.InvalidZone as exc:
        raise errors.InvalidZone(f"disk {disk.name!r} reports zones {list(disk.zones)!r}: not an integer zone") from exc


def ensure_disk(api: ComputeApi, *, resource_group: str, location: str, name: str, size_gib: int, sku: str,
                zone: str | None, tags: Mapping[str, str], timeout: float) -> tuple[Disk, bool]:
    """Create the disk unless it exists; returns ``(disk, created)``. ``zone`` is a label (``eastus-2``) or None."""
    region = normalize_region(location)
    if size_gib <= 0:
        raise errors.CloudZonesError(f"disk size must be a positive number of GiB, got {size_gib!r}")
    zone_number: str | None = None
    if zone is not None:
        if sku in ZONE_REDUNDANT_SKUS:
            raise errors.CloudZonesError(f"{sku} disks are zone-redundant and cannot be pinned to zone {zone!r}")
        if not is_availability_zone(zone, region):
            raise errors.InvalidZone(f"zone {zone!r} is not an availability zone of region {region!r}"
                                     " (a fault domain such as '0' means an unzoned disk)")
        zone_number = zone_id(zone, region)
    existing = api.get_disk(resource_group, name)
    if existing is not None:
        _check_matches(existing, zone=zone, size_gib=size_gib, sku=sku)
        return existing, False
    body = disk_body(location=region, size_gib=size_gib, sku=sku, zone=zone_number, tags=tags)
    try:
        return api.create_disk(resource_group, name, body, timeout=timeout), True
    except errors.CloudApiError as exc:
        hint = next((text for code, text in _HINTS.items() if f" {code}:" in str(exc)), "")
        if hint:
            raise errors.CloudApiError(f"{hint}: {exc}", status=exc.status, retry_after=exc.retry_after) from exc
        raise


def _check_matches(disk: Disk, *, zone: str | None, size_gib: int, sku: str) -> None:
    have = disk_zone_label(disk)
    if have != zone:
        raise errors.CloudZonesError(
            f"disk {disk.name!r} already exists in zone {have or 'none'} but zone {zone or 'none'} was asked for;"
            " refusing to reuse it")
    if disk.sku and disk.sku != sku:
        raise errors.CloudZonesError(f"disk {disk.name!r} already exists with SKU {disk.sku}, not {sku}")
    if disk.size_gib and disk.size_gib < size_gib:
        raise errors.CloudZonesError(
            f"disk {disk.name!r} already exists with {disk.size_gib} GiB, less than {size_gib}")


def delete_disk(api: ComputeApi, *, resource_group: str, name: str, timeout: float) -> bool:
    """Delete the disk; False when it was already gone. Refuses a disk that is still attached."""
    disk = api.get_disk(resource_group, name)
    if disk is None:
        return False
    if disk.managed_by:
        raise errors.CloudZonesError(f"disk {name!r} is still attached to {disk.managed_by}; detach it first")
    api.delete_disk(resource_group, name, timeout=timeout)
    return True


def volume_disk_uri(pv: Mapping[str, Any]) -> str | None:
    """The managed-disk URI behind a PV (in-tree ``azureDisk`` or CSI ``disk.csi.azure.com``), else None."""
    spec = pv.get("spec") or {}
    in_tree = spec.get("azureDisk")
    if isinstance(in_tree, Mapping):
        if in_tree.get("diskName") == PLACEHOLDER:
            return None
        kind = str(in_tree.get("kind") or "Managed")
        if kind.lower() != "managed":
            return None  # blob-backed (shared/dedicated) disks have no zone
        return str(in_tree.get("diskURI") or "")
    csi = spec.get("csi")
    if isinstance(csi, Mapping) and csi.get("driver") == CSI_DRIVER:
        handle = str(csi.get("volumeHandle") or "")
        return None if handle.endswith("/" + PLACEHOLDER) else handle
    return None


def labels_for_disk(disk: Disk) -> dict[str, str]:
    """Region (and zone when zoned) labels, GA and beta, for a PV backed by ``disk``."""
    region = normalize_region(disk.location)
    zone = disk_zone_label(disk)
    return Topology(region, zone or "").labels(beta=True)


def check_subscription(uri: str, subscription_id: str) -> resource_ids.ResourceId:
    """Parse ``uri`` and refuse disks outside ``subscription_id`` (the webhook must not read arbitrary ones)."""
    parsed = resource_ids.parse_disk_uri(uri)
    if not subscription_id or parsed.subscription.lower() != subscription_id.lower():
        raise errors.CloudZonesError(
            f"disk {uri!r} is in subscription {parsed.subscription!r}, outside the configured subscription"
            f" {subscription_id!r}; refusing to read it")
    return parsed
