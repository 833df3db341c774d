"""`Provisioner`: a claim and its StorageClass in, a zoned managed disk and a PersistentVolume out.

The disk is named from the claim's UID, so provisioning the same claim twice (a retry, or another
replica after a crash between disk and PV creation) finds the first disk and writes nothing new.
The provider is injected (any object with the `DiskProvider` methods), keeping this module free of
cloud SDKs.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

from cloudzones import errors, labels
from cloudzones import quantity as quantities
from storageclass.parameters import AZURE_DISK_PROVISIONERS
from storageclass.spec import StorageClassSpec
from storageclass.topology import volume_topology
from storageclass.zones import Mode, ZoneChoice, explain_zones

log = logging.getLogger(__name__)

IN_TREE = "kubernetes.io/azure-disk"
CSI_DRIVER = "disk.csi.azure.com"
_GIB = 1024**3


class DiskLike(Protocol):
    """What the provisioner reads back from a created disk."""

    id: str
    name: str


class DiskProvider(Protocol):
    """The cloud operations the provisioner needs (`providers.azure.AzureProvider` has them)."""

    def ensure_disk(self, name: str, size_gib: int, sku: str, zone: str | None,
                    tags: Mapping[str, str] | None = None) -> tuple[Any, bool]:
        """Create the disk unless it exists; ``(disk, created)``."""

    def delete_volume_disk(self, pv: Mapping[str, Any]) -> bool:
        """Delete the disk behind ``pv``; False when it was already gone."""


def size_in_gib(quantity: str) -> int:
    """A Kubernetes quantity (``10Gi``, ``100G``, ``512Mi``) rounded up to whole GiB, as Azure disks are sized."""
    try:
        size = quantities.parse(quantity, "storage request")
    except quantities.InvalidQuantity as exc:
        raise errors.CloudZonesError(str(exc)) from None
    if size <= 0:
        raise errors.CloudZonesError(f"storage request {quantity!r:.60} must be positive")
    return max(1, -(-size // _GIB))


class Provisioner:
    """Provision and delete zoned Azure managed disks for PersistentVolumeClaims."""

    def __init__(self, provider: DiskProvider, *, region: str | None = None, mode: Mode = "balanced",
                 csi: bool = False, provisioners: Collection[str] = AZURE_DISK_PROVISIONERS) -> None:
        self.provider = provider
        config = getattr(provider, "config", None)
        self.region = region or getattr(config, "location", "") or ""
        """The cluster's region; StorageClass zones are checked against it."""
        self.mode: Mode = mode
        self.csi = csi
        """Write the CSI (``disk.csi.azure.com``) PV form instead of the in-tree ``azureDisk`` one."""
        self.provisioners = frozenset(provisioners)
        """The StorageClass ``provisioner`` names accepted (a service running under its own name adds it)."""

    def provision(self, pvc: Mapping[str, Any], storage_class: Mapping[str, Any], *, active_zones: Iterable[str],
                  selected_node: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Create (or find) the claim's disk and return its PersistentVolume manifest."""
        return self.provision_explained(pvc, storage_class, active_zones=active_zones, selected_node=selected_node)[0]

    def provision_explained(self, pvc: Mapping[str, Any], storage_class: Mapping[str, Any], *,
                            active_zones: Iterable[str], selected_node: Mapping[str, Any] | None = None,
                            ) -> tuple[dict[str, Any], ZoneChoice]:
        """`provision`, also returning the zone choice and the rule that decided it."""
        if not self.region:
            raise errors.ConfigError("the provisioner needs the cluster's region (region= or a configured provider)")
        spec = StorageClassSpec.from_manifest(storage_class, region=self.region, provisioners=self.provisioners)
        meta = pvc.get("metadata") or {}
        claim_name, namespace, uid = str(meta.get("name") or ""), str(meta.get("namespace") or "default"), str(
            meta.get("uid") or "")
        if not claim_name or not uid:
            raise errors.CloudZonesError(f"claim {namespace}/{claim_name or '?'} needs metadata.name and metadata.uid")
        requested = ((pvc.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")
        if requested is None:
            raise errors.CloudZonesError(f"claim {namespace}/{claim_name} requests no storage")
        size = size_in_gib(str(requested))
        choice = explain_zones(spec, pvc_name=claim_name, active_zones=active_zones, selected_node=selected_node,
                               mode=self.mode, statefulset=_owner_statefulset(meta))
        zone = choice.zones[0] if choice.zones else None
        name = f"pvc-{uid}"
        tags = {"kubernetes.io-created-for-pvc-name": claim_name, "kubernetes.io-created-for-pvc-namespace": namespace,
                "kubernetes.io-created-for-pv-name": name, "k8s-azure-created-by": "cloudzones"}
        disk, created = self.provider.ensure_disk(name, size, spec.sku, zone, tags)
        log.info("%s disk %s for claim %s/%s in %s (%s)", "created" if created else "found", name, namespace,
                 claim_name, zone or "no zone", choice.rule)
        return self._volume(pvc, spec, disk_id=disk.id, disk_name=name, size_gib=size, zone=zone), choice

    def _volume(self, pvc: Mapping[str, Any], spec: StorageClassSpec, *, disk_id: str, disk_name: str,
                size_gib: int, zone: str | None) -> dict[str, Any]:
        meta, claim = pvc.get("metadata") or {}, pvc.get("spec") or {}
        pv_labels, affinity = volume_topology(zone, self.region, zone_redundant=spec.zone_redundant)
        if self.csi and zone is not None:
            # The CSI driver labels nodes with its own key; its PVs select on it.
            for term in affinity["required"]["nodeSelectorTerms"]:
                for requirement in term["matchExpressions"]:
                    if requirement["key"] == labels.ZONE:
                        requirement["key"] = labels.CSI_DISK_ZONE
        pv_spec: dict[str, Any] = {
            "capacity": {"storage": f"{size_gib}Gi"},
            "accessModes": list(claim.get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": spec.reclaim_policy or "Delete",
            "storageClassName": spec.name,
            "volumeMode": claim.get("volumeMode") or "Filesystem",
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": meta.get("namespace", "default"), "name": meta.get("name"),
                         "uid": meta.get("uid")},
            "nodeAffinity": affinity,
        }
        if spec.mount_options:
            pv_spec["mountOptions"] = list(spec.mount_options)
        fs_type = spec.fs_type or "ext4"
        if self.csi:
            pv_spec["csi"] = {"driver": CSI_DRIVER, "volumeHandle": disk_id, "fsType": fs_type,
                              "volumeAttributes": {"skuName": spec.sku, "cachingMode": spec.caching_mode}}
        else:
            pv_spec["azureDisk"] = {"diskName": disk_name, "diskURI": disk_id, "kind": "Managed",
                                    "cachingMode": spec.caching_mode, "fsType": fs_type, "readOnly": False}
        return {"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": disk_name, "labels": pv_labels,
                             "annotations": {"pv.kubernetes.io/provisioned-by": CSI_DRIVER if self.csi else IN_TREE}},
                "spec": pv_spec}

    def delete(self, pv: Mapping[str, Any]) -> None:
        """Delete the disk behind ``pv`` (idempotent); a ``Retain`` volume's disk is never deleted."""
        policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy")
        name = (pv.get("metadata") or {}).get("name")
        if policy == "Retain":
            raise errors.CloudZonesError(f"PersistentVolume {name!r} has reclaim policy Retain; not deleting its disk")
        if not self.provider.delete_volume_disk(pv):
            log.info("disk of PersistentVolume %s was already gone", name)


def _owner_statefulset(metadata: Mapping[str, Any]) -> str | None:
    for owner in metadata.get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("kind") == "StatefulSet" and owner.get("name"):
            return str(owner["name"])
    return None
