"""Parse Azure provider IDs, ARM resource IDs, disk URIs and VMSS computer names (pure).

Provider IDs look like ``azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/
virtualMachines/<vm>`` or ``.../virtualMachineScaleSets/<ss>/virtualMachines/<instance>``. ARM treats
segment names case-insensitively, and tools disagree on the case of ``resourceGroups``, so we match
the fixed segments case-insensitively and keep the values as written.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from cloudzones import errors

_SCHEME = "azure://"
_BASE36 = re.compile(r"[0-9a-zA-Z]{6}")


@dataclasses.dataclass(frozen=True)
class ResourceId:
    """The parts of an Azure Compute resource ID that zone lookups need."""

    subscription: str
    resource_group: str
    """As written in the ID; compare with :meth:`same_group` (ARM names are case-insensitive)."""
    resource_type: str
    """``virtualMachines``, ``virtualMachineScaleSets/virtualMachines`` or ``disks`` (canonical case)."""
    name: str
    """The VM or disk name; for a VMSS instance, ``<scale set>_<instance id>``."""
    scale_set: str = ""
    instance_id: str = ""

    @property
    def is_scale_set_instance(self) -> bool:
        """Whether this names a VMSS (uniform) instance rather than a standalone or flex VM."""
        return bool(self.scale_set)

    def same_group(self, resource_group: str) -> bool:
        """Whether ``resource_group`` is this ID's resource group, ignoring case."""
        return self.resource_group.lower() == resource_group.lower()


_TYPES = {
    ("microsoft.compute", "virtualmachines"): "virtualMachines",
    ("microsoft.compute", "disks"): "disks",
}


def parse_resource_id(resource_id: str) -> ResourceId:
    """Parse an ARM ID of a VM, a VMSS instance or a managed disk; `InvalidResourceId` otherwise."""
    if not isinstance(resource_id, str):
        raise errors.InvalidResourceId(f"resource ID must be a string, got {resource_id!r}")
    parts = resource_id.split("/")
    # "", "subscriptions", sub, "resourceGroups", rg, "providers", namespace, type, name[, child type, child]
    if (len(parts) not in (9, 11) or parts[0] != "" or parts[1].lower() != "subscriptions"
            or parts[3].lower() != "resourcegroups" or parts[5].lower() != "providers"
            or any(not p for p in parts[1:])):
        raise errors.InvalidResourceId(f"not an Azure Compute resource ID: {resource_id!r}")
    subscription, group, namespace = parts[2], parts[4], parts[6].lower()
    if len(parts) == 9:
        kind = _TYPES.get((namespace, parts[7].lower()))
        if kind is None:
            raise errors.InvalidResourceId(
                f"unsupported resource type {parts[6]}/{parts[7]} in {resource_id!r}"
                " (expected Microsoft.Compute/virtualMachines or Microsoft.Compute/disks)")
        return ResourceId(subscription, group, kind, parts[8])
    if namespace != "microsoft.compute" or (parts[7].lower(), parts[9].lower()) != (
            "virtualmachinescalesets", "virtualmachines"):
        raise errors.InvalidResourceId(f"unsupported resource type in {resource_id!r}")
    scale_set, instance = parts[8], parts[10]
    # Disks' managedBy uses "<ss>_<id>" where provider IDs use the bare instance id.
    if instance.lower().startswith(scale_set.lower() + "_"):
        instance = instance.rsplit("_", 1)[1]
    if not instance.isascii() or not instance.isdigit():
        raise errors.InvalidResourceId(f"VMSS instance id {parts[10]!r} is not a number in {resource_id!r}")
    return ResourceId(subscription, group, "virtualMachineScaleSets/virtualMachines",
                      f"{scale_set}_{instance}", scale_set=scale_set, instance_id=instance)


def parse_provider_id(provider_id: str) -> ResourceId | None:
    """Parse a node's ``spec.providerID``; ``None`` when it is not an Azure ID (another cloud manages it).

    An empty provider ID raises `InvalidResourceId`: the node is not initialised yet, and saying
    "not Azure" would make callers skip a node they should retry. Results are cached (a node's ID
    never changes, and the controller asks again on every reconcile and resync).
    """
    if not isinstance(provider_id, str):
        return None
    return _parse_provider_id(provider_id)


@functools.lru_cache(maxsize=16384)
def _parse_provider_id(provider_id: str) -> ResourceId | None:
    if provider_id == "":
        raise errors.InvalidResourceId("provider ID is empty: the node is not initialized yet")
    if not provider_id.startswith(_SCHEME):
        return None
    path = provider_id[len(_SCHEME):]
    if not path.lower().startswith("/subscriptions/"):
        return None
    try:
        parsed = parse_resource_id(path)
    except errors.InvalidResourceId as exc:
        raise errors.InvalidResourceId(f"malformed Azure provider ID {provider_id!r}: {exc}") from exc
    if parsed.resource_type == "disks":
        raise errors.InvalidResourceId(f"provider ID {provider_id!r} names a disk, not a machine")
    return parsed


def parse_disk_uri(disk_uri: str) -> ResourceId:
    """Parse a managed-disk URI ``/subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/disks/<n>``."""
    try:
        parsed = parse_resource_id(disk_uri)
    except errors.InvalidResourceId as exc:
        raise errors.InvalidResourceId(f"invalid disk URI: {disk_uri!r}") from exc
    if parsed.resource_type != "disks":
        raise errors.InvalidResourceId(f"invalid disk URI (not a managed disk): {disk_uri!r}")
    return parsed


def disk_uri(subscription: str, resource_group: str, name: str) -> str:
    """The ARM ID of a managed disk, in the canonical case that ARM returns."""
    return f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/disks/{name}"


def vmss_instance_id(computer_name: str) -> str:
    """The decimal instance id encoded in a uniform VMSS computer name: ``"vm00000Z"`` → ``"35"``.

    The last six characters are the instance id in base 36 (cloud-provider-azure ``getScaleSetVMInstanceID``).
    """
    if not isinstance(computer_name, str) or len(computer_name) < 6 or not _BASE36.fullmatch(computer_name[-6:]):
        raise errors.InvalidResourceId(
            f"{computer_name!r} is not a VMSS computer name (expected a prefix and 6 base-36 digits)")
    return str(int(computer_name[-6:], 36))


def vmss_computer_name(prefix: str, instance_id: int) -> str:
    """The computer name of instance ``instance_id`` of a uniform scale set: ``("vm", 35)`` → ``"vm00000z"``."""
    if isinstance(instance_id, bool) or not isinstance(instance_id, int) or not 0 <= instance_id < 36**6:
        raise errors.InvalidResourceId(f"VMSS instance id must be an integer in [0, 36**6), got {instance_id!r}")
    digits, number, text = "0123456789abcdefghijklmnopqrstuvwxyz", instance_id, ""
    for _ in range(6):
        number, rest = divmod(number, 36)
        text = digits[rest] + text
    return f"{prefix}{text}"


def vmss_computer_name_prefix(computer_name: str) -> str:
    """The computer-name prefix of a uniform VMSS instance name (everything before the base-36 id)."""
    vmss_instance_id(computer_name)
    return computer_name[:-6]
