"""Reads VMs and scale-set instances through azure-mgmt-compute (the only module importing it).

Results are reduced to small `Instance` / `ScaleSet` records at once: a controller caching 5,000
nodes should not keep 5,000 full SDK models alive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypedDict, TypeVar

from azure.core.rest import HttpRequest
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute import models as compute_models

# The SDK's request builders (URL, api-version, query) are module functions of its operations module; we
# use the one for the hot list so that the request stays exactly the SDK's while we skip its model layer.
from azure.mgmt.compute.operations import _operations

from cloudzones import documents, shapes
from providers.azure import arm

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Instance:
    """What zone resolution needs to know about one VM or scale-set instance."""

    name: str
    computer_name: str
    """``osProfile.computerName``, lower-cased: the Kubernetes node name."""
    location: str
    zones: tuple[str, ...]
    fault_domain: int | None
    instance_id: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class ScaleSet:
    """A scale set's identity: its name, computer-name prefix and orchestration mode."""

    name: str
    computer_name_prefix: str
    """Lower-cased; the scale set's name when the profile sets none."""
    uniform: bool


def _text(value: Any) -> str:
    """The string behind an SDK enum member or plain value (``str()`` of an enum gives its qualified name)."""
    return str(getattr(value, "value", value) or "")


_INSTANCE_JSON = {"name": str, "location": str, "zones": shapes.ListOf(str), "instanceId": str,
                  "properties": {"osProfile": {"computerName": str}, "instanceView": {"platformFaultDomain": int}}}
_PAGE = {"value": shapes.ListOf(_INSTANCE_JSON), "nextLink": str}
"""What `_instance_json` reads of a page of ARM's instance list, checked before it is read."""


# The same fields as TypedDicts, for `documents.peer_json_reader`: a page is read straight into them.
# Null is "absent", as in shapes.check. tests/test_arm_zones.py checks that both say the same.
class _OsProfile(TypedDict, total=False):
    computerName: str | None


class _InstanceView(TypedDict, total=False):
    platformFaultDomain: int | None


class _Properties(TypedDict, total=False):
    osProfile: _OsProfile | None
    instanceView: _InstanceView | None


class _InstanceItem(TypedDict, total=False):
    name: str | None
    location: str | None
    zones: list[str] | None
    instanceId: str | None
    properties: _Properties | None


class _Page(TypedDict, total=False):
    value: list[_InstanceItem] | None
    nextLink: str | None


_read_page = documents.peer_json_reader(_Page)


def _instance_json(item: dict[str, Any]) -> Instance:
    """`_instance` of a VM or scale-set instance as ARM's JSON has it (camelCase under ``properties``)."""
    properties = item.get("properties") or {}
    name = str(item.get("name") or "")
    computer = str((properties.get("osProfile") or {}).get("computerName") or name).lower()
    view = properties.get("instanceView") or {}
    fault_domain = view.get("platformFaultDomain")
    return Instance(name=name, computer_name=computer, location=str(item.get("location") or ""),
                    zones=tuple(item.get("zones") or ()),
                    fault_domain=int(fault_domain) if isinstance(fault_domain, int) else None,
                    instance_id=str(item.get("instanceId") or ""))


def _page(body: bytes) -> dict[str, Any]:
    """A page of ARM's instance list, with only what `_instance_json` reads of it (5x less CPU than all of it)."""
    try:
        page: dict[str, Any] = _read_page(body)
        return page
    except ValueError:
        # Not a page as ARM sends them: read whole, for the error that names the field in our words (or,
        # for what only the whole read takes, such as a fault domain past 64 bits, for the value itself).
        whole = documents.peer_json(body)
        if not isinstance(whole, dict):
            raise ValueError(f"expected a page of instances, got {shapes.describe(whole)}") from None
        shapes.check(whole, _PAGE)
        return whole


def _instance(model: Any) -> Instance:
    model = arm.expect(model, (compute_models.VirtualMachine, compute_models.VirtualMachineScaleSetVM))
    os_profile = getattr(model, "os_profile", None)
    computer = (getattr(os_profile, "computer_name", None) or model.name or "").lower()
    view = getattr(model, "instance_view", None)
    fault_domain = getattr(view, "platform_fault_domain", None) if view is not None else None
    return Instance(name=model.name or "", computer_name=computer, location=model.location or "",
                    zones=tuple(model.zones or ()), fault_domain=fault_domain,
                    instance_id=str(getattr(model, "instance_id", "") or ""))


@dataclasses.dataclass(frozen=True, slots=True)
class Disk:
    """A managed disk as provisioning and labelling need it."""

    id: str
    name: str
    location: str
    zones: tuple[str, ...]
    sku: str
    size_gib: int
    managed_by: str
    provisioning_state: str
    tags: dict[str, str]


def _disk(model: Any) -> Disk:
    model = arm.expect(model, compute_models.Disk)
    # ARM always says where a disk is; without it the PV would be labelled with nothing, silently.
    if not model.location:
        raise ValueError("a disk without a location")
    if any(not isinstance(zone, str) for zone in model.zones or ()):
        raise ValueError(f"a disk whose zones are {model.zones!r:.80}, not zone numbers")
    return Disk(id=model.id or "", name=model.name or "", location=model.location or "",
                zones=tuple(model.zones or ()), sku=_text(getattr(getattr(model, "sku", None), "name", None)),
                size_gib=int(getattr(model, "disk_size_gb", 0) or 0), managed_by=str(model.managed_by or ""),
                provisioning_state=_text(getattr(model, "provisioning_state", None)), tags=dict(model.tags or {}))



def _scale_set(model: Any) -> ScaleSet:
    model = arm.expect(model, compute_models.VirtualMachineScaleSet)
    profile = getattr(model, "virtual_machine_profile", None)
    os_profile = getattr(profile, "os_profile", None) if profile is not None else None
    prefix = getattr(os_profile, "computer_name_prefix", None) or model.name or ""
    mode = _text(getattr(model, "orchestration_mode", None)) or "Uniform"
    return ScaleSet(name=model.name or "", computer_name_prefix=prefix.lower(), uniform=mode.lower() == "uniform")


class ComputeApi(arm.ArmApi):
    """VM and VMSS reads for one subscription, with gating, counting and bounded retries."""

    client_class = ComputeManagementClient

    def get_vm(self, resource_group: str, name: str) -> Instance | None:
        """A VM with its instance view, or None when ARM says it does not exist."""
        found = self._find(f"get VM {resource_group}/{name}", lambda: _instance(
            self.client.virtual_machines.get(resource_group, name, expand="instanceView")))
        if found is not None and not found.zones and found.fault_domain is None:
            # Some API versions omit the instance view from an expanded GET; ask for it directly.
            view = self._call(f"get instance view of VM {resource_group}/{name}", lambda: arm.expect(
                self.client.virtual_machines.instance_view(resource_group, name),
                compute_models.VirtualMachineInstanceView))
            found = dataclasses.replace(found, fault_domain=view.platform_fault_domain)
        return found

    def list_vms(self, resource_group: str) -> list[Instance]:
        """Every VM of a resource group (standalone, availability-set and flexible-VMSS VMs)."""
        return self._list(f"list VMs in {resource_group}",
                          lambda: self.client.virtual_machines.list(resource_group), _instance)

    def list_scale_sets(self, resource_group: str) -> list[ScaleSet]:
        """Every scale set of a resource group."""
        return self._list(f"list scale sets in {resource_group}",
                          lambda: self.client.virtual_machine_scale_sets.list(resource_group), _scale_set)

    def list_scale_set_vms(self, resource_group: str, scale_set: str) -> list[Instance] | None:
        """Every instance of a uniform scale set with its instance view (one paged list); None if it is gone.

        The hot call of a controller (5,000 instances of 3-10 KB each): the SDK builds the request and
        sends it through its pipeline (auth, retries, our gate), but the pages are read as plain JSON
        for the five fields we keep; deserializing them into SDK models cost most of the CPU.
        """
        request = _operations.build_virtual_machine_scale_set_vms_list_request(
            resource_group, scale_set, self.client._config.subscription_id, expand="instanceView")
        return self._find(f"list instances of scale set {resource_group}/{scale_set}",
                          lambda: [_instance_json(item) for item in self._raw_items(request)])

    def _raw_items(self, request: HttpRequest) -> Iterator[dict[str, Any]]:
        """The ``value`` items of a paged ARM list, following ``nextLink``, as parsed JSON."""
        while True:
            # stream=True keeps the pipeline's content-decode policy from parsing the page too (it would
            # be parsed twice); the body is read here, whole, and parsed once, from bytes.
            response = self.client.send_request(request, stream=True)
            body = response.read()
            response.raise_for_status()
            page = _page(body)
            yield from page.get("value") or []
            link = page.get("nextLink")
            if not link:
                return
            request = HttpRequest("GET", link)

    def get_disk(self, resource_group: str, name: str) -> Disk | None:
        """A managed disk, or None when ARM says it does not exist."""
        return self._find(f"get disk {resource_group}/{name}",
                          lambda: _disk(self.client.disks.get(resource_group, name)))

    def create_disk(self, resource_group: str, name: str, body: dict[str, Any], *, timeout: float) -> Disk:
        """PUT a disk and wait (bounded) for the long-running operation to finish."""
        action = f"create disk {resource_group}/{name}"
        poller = self._call(action, lambda: self.client.disks.begin_create_or_update(
            resource_group, name, compute_models.Disk(body)))
        return self._call(action, lambda: _disk(poller.result(timeout=timeout)))

    def delete_disk(self, resource_group: str, name: str, *, timeout: float) -> None:
        """DELETE a disk and wait (bounded); a disk that is already gone is fine."""
        self._find(f"delete disk {resource_group}/{name}",
                   lambda: self.client.disks.begin_delete(resource_group, name).result(timeout=timeout))

    def _list(self, action: str, pages: Callable[[], Iterable[Any]], convert: Callable[[Any], T]) -> list[T]:
        return self._call(action, lambda: [convert(model) for model in pages()])
