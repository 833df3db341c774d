"""Where a machine is: region, availability zone or fault domain, and the labels that say so.

Azure writes an availability zone as ``<region>-<n>`` (``eastus-2``) so that it can never be
confused with a fault domain (``"0"``), which is what an unzoned VM reports instead.
"""

from __future__ import annotations

import dataclasses
import re

from cloudzones import errors, labels

# Python's int() accepts " 1", "1_0", "+1" and non-ASCII digits; Azure zone ids are plain ASCII digits, and
# few of them (1-3 today): nine digits bound what reaches int(), which raises past 4,300.
_ZONE_ID = re.compile(r"[0-9]{1,9}")
_MAX_ZONE_ID = 999_999_999


def normalize_region(location: str) -> str:
    """The region label value for an Azure location: lower case, spaces dropped (``"West US"`` → ``westus``)."""
    return location.strip().lower().replace(" ", "")


def parse_zone_id(zone_id: int | str) -> int:
    """The integer behind a zone id (``"01"`` → 1); `InvalidZone` for anything but non-negative ASCII digits."""
    if isinstance(zone_id, bool):
        raise errors.InvalidZone(f"zone id must be an integer, got {zone_id!r}")
    if isinstance(zone_id, int):
        if zone_id < 0:
            raise errors.InvalidZone(f"zone id must not be negative, got {zone_id!r}")
        if zone_id > _MAX_ZONE_ID:
            raise errors.InvalidZone(f"zone id must have at most 9 digits, got {zone_id!r:.40}")
        return zone_id
    if isinstance(zone_id, str) and _ZONE_ID.fullmatch(zone_id):
        return int(zone_id)
    raise errors.InvalidZone(f"zone id must be a non-negative integer written in 1-9 digits, got {zone_id!r:.40}")


def make_zone(region: str, zone_id: int | str) -> str:
    """The zone label for availability zone ``zone_id`` of ``region``: ``("EASTUS", 2)`` → ``"eastus-2"``."""
    number = parse_zone_id(zone_id)
    normalized = normalize_region(region)
    if not normalized:
        # An empty region once produced zone labels like "-2" (cloud-provider-azure #219).
        raise errors.InvalidZone(f"cannot make a zone label for zone {zone_id!r} without a region")
    return f"{normalized}-{number}"


def zone_id(zone_label: str, region: str) -> str:
    """The zone number in ``zone_label`` (``"eastus-1"`` → ``"1"``), or ``""`` when it is not an AZ of ``region``."""
    prefix = normalize_region(region) + "-"
    if not region or not zone_label.startswith(prefix):
        return ""
    suffix = zone_label[len(prefix):]
    if not _ZONE_ID.fullmatch(suffix):
        return ""
    return str(int(suffix))


def is_availability_zone(zone_label: str, region: str) -> bool:
    """Whether ``zone_label`` names an availability zone of ``region`` (a fault domain like ``"0"`` never does)."""
    return zone_id(zone_label, region) != ""


def is_fault_domain(zone_label: str) -> bool:
    """Whether a zone label value is an unzoned Azure VM's fault domain (``"0"``), never an availability zone.

    Digits only: zones are ``<region>-<n>`` on Azure, ``us-east-1a`` on AWS, ``us-central1-a`` on GCP.
    """
    return _ZONE_ID.fullmatch(zone_label) is not None


def noun(zone_label: str) -> str:
    """What a zone label value names, in words: ``fault domain`` for an unzoned VM's, else ``zone``."""
    return "fault domain" if is_fault_domain(zone_label) else "zone"


@dataclasses.dataclass(frozen=True)
class Topology:
    """A machine's place in the cloud, as Kubernetes topology labels see it."""

    region: str
    """The region, lower case (``eastus``)."""
    zone: str
    """The zone label value: ``<region>-<n>`` when zoned, the fault domain when not, ``""`` when unknown."""
    fault_domain: str | None = None
    """The platform fault domain, when the cloud reports one (Azure only)."""
    sub_fault_domain: str | None = dataclasses.field(default=None, kw_only=True)
    """Azure's ``platformSubFaultDomain``, when present and not empty."""

    @property
    def is_availability_zone(self) -> bool:
        """Whether ``zone`` is a real availability zone rather than a fault domain or nothing."""
        return is_availability_zone(self.zone, self.region)

    def labels(self, *, beta: bool = True) -> dict[str, str]:
        """The GA region/zone labels, and the deprecated beta ones when ``beta``; empty values are left out."""
        pairs = [(labels.REGION, self.region), (labels.ZONE, self.zone)]
        if beta:
            pairs += [(labels.BETA_REGION, self.region), (labels.BETA_ZONE, self.zone)]
        return {key: value for key, value in pairs if value}

    def node_labels(self, *, beta: bool = True) -> dict[str, str]:
        """Every label a node labeller applies: :meth:`labels` plus the Azure fault-domain keys where known."""
        result = self.labels(beta=beta)
        if self.fault_domain and not self.is_availability_zone:
            result[labels.FAULT_DOMAIN] = self.fault_domain
        if self.sub_fault_domain:
            result[labels.SUB_FAULT_DOMAIN] = self.sub_fault_domain
        return result
