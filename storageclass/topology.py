"""A PersistentVolume's topology labels and ``spec.nodeAffinity`` for a zoned, unzoned or zone-redundant disk.

A zoned disk attaches only to VMs in its zone; an unzoned (regional LRS) disk only to *unzoned*
VMs of its region; a zone-redundant (ZRS) disk to every VM of its region. The node affinity says
exactly that, so the scheduler never puts a pod where its disk cannot attach.

**Unzoned disks.** In-tree Kubernetes required ``zone In ["0"]``, ``["1"]`` or ``["2"]`` (the fault
domains of an availability set, kubernetes#67229). VMSS Flex reports fault domains far beyond 2
(Azure's IMDS sample shows ``36``), and a ``NotIn`` over zone labels cannot list "every zone of
the region". Instead we use what a fault-domain label *is*: an integer, while a zone label is
``<region>-<n>``. Kubernetes' ``Gt`` operator parses the node's label as an integer and fails to
match when it cannot, so ``zone Gt "0"`` matches exactly the unzoned nodes with a fault domain
above 0 and no zoned node (``eastus-1`` is not an integer); ``zone In ["0"]`` adds fault domain 0
(``Gt "-1"`` would say both at once but ``-1`` is not a valid label value, which the API checks).
A third term covers nodes that carry our ``topology.kubernetes.azure.com/fault-domain`` label but
no zone label at all (cloud-provider-azure #10222 proposes to stop writing fault domains as
zones): ``fault-domain Exists`` and ``zone DoesNotExist``. Every term also requires the region,
so a disk is never attached across regions. The affinity uses the GA keys, which every node
labeller writes (the beta ones are optional).
"""

from __future__ import annotations

from typing import Any

from cloudzones import errors, labels, topology


def _requirement(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        requirement["values"] = values
    return requirement


def volume_topology(zone: str | None, region: str, *,
                    zone_redundant: bool = False) -> tuple[dict[str, str], dict[str, Any]]:
    """(labels, ``spec.nodeAffinity``) of the PV for a disk in ``zone`` of ``region``.

    ``zone`` is the zone label (``eastus-2``) or None for an unzoned disk; ``zone_redundant`` marks
    a ZRS disk (no zone, usable from every node of the region). Raises `InvalidZone` for a zone
    that is not an availability zone of ``region`` (a fault domain such as ``"0"`` is not), or for
    a zone given with ``zone_redundant``.
    """
    normalized = topology.normalize_region(region)
    if not normalized:
        raise errors.InvalidZone(f"a volume's topology needs a region, got {region!r}")
    if zone is not None and zone_redundant:
        raise errors.InvalidZone(f"a zone-redundant disk has no zone, got zone {zone!r}")
    in_region = _requirement(labels.REGION, "In", [normalized])
    region_labels = {labels.REGION: normalized, labels.BETA_REGION: normalized}
    if zone_redundant:
        return region_labels, _affinity([[in_region]])
    if zone is None:
        terms = [
            [in_region, _requirement(labels.ZONE, "In", ["0"])],
            [in_region, _requirement(labels.ZONE, "Gt", ["0"])],
            [in_region, _requirement(labels.FAULT_DOMAIN, "Exists"), _requirement(labels.ZONE, "DoesNotExist")],
        ]
        return region_labels, _affinity(terms)
    number = topology.zone_id(zone, normalized)
    if not number or zone != topology.make_zone(normalized, number):
        raise errors.InvalidZone(f"{zone!r} is not an availability zone of region {normalized!r} "
                                 f"(expected {topology.make_zone(normalized, 1)!r} or similar)")
    zone_labels = {**region_labels, labels.ZONE: zone, labels.BETA_ZONE: zone}
    return zone_labels, _affinity([[_requirement(labels.ZONE, "In", [zone]), in_region]])


def _affinity(terms: list[list[dict[str, Any]]]) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}}
