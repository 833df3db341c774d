"""Tests for ARM zone lookups through azure-mgmt-compute: VMs, VMSS uniform and flex, budgets, throttling."""

from __future__ import annotations

import copy
import json
import types
import typing
from typing import Any

import pytest
import responses

from cloudzones import errors, shapes
from cloudzones.topology import Topology
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from tests.conftest import FakeClock, FakeCredential, fixture_body

SUB = "00000000-0000-0000-0000-0000000000aa"
ARM = f"https://management.azure.com/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute"


def pid(path: str) -> str:
    """A provider ID in resource group rg."""
    return f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/{path}"


def make_provider(clock: FakeClock, **config: Any) -> AzureProvider:
    """A provider against the public ARM endpoint (mocked by responses), no real sleeps."""
    cfg = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "RG", "location": "westus2"} | config,
                                   environ={})
    return AzureProvider(cfg, credential=FakeCredential(), clock=clock, sleep=clock.sleep,
                         arm_settings=ArmSettings(backoff_factor=0.0))


def zoned_vm() -> dict[str, Any]:
    """A VM GET body with zones ['3'] (spec example)."""
    return fixture_body("arm/compute/VirtualMachines_CreateOrUpdate_WithPlacementZones_2025-04-01.json")


def vmss_vm(instance: int, zone: str | None, computer: str, fault_domain: int = 0) -> dict[str, Any]:
    """A uniform VMSS VM list item, derived from the spec-shaped fixture with a zone and instance view."""
    body = copy.deepcopy(fixture_body("arm/compute/derived_VirtualMachineScaleSetVMs_Get_WithZone_InstanceView.json"))
    body["name"] = f"ss_{instance}"
    body["instanceId"] = str(instance)
    body["zones"] = [zone] if zone else None
    body["properties"].setdefault("osProfile", {})["computerName"] = computer
    body["properties"]["instanceView"]["platformFaultDomain"] = fault_domain
    return body


class TestVmLookups:
    """Standalone and flexible-VMSS VMs resolve through GET virtualMachines."""

    @responses.activate
    def test_zoned_vm(self, clock: FakeClock) -> None:
        """zones[0] in the VM's own location."""
        responses.get(f"{ARM}/virtualMachines/myVM", json=zoned_vm())
        topology = make_provider(clock).topology_by_provider_id(pid("virtualMachines/myVM"))
        assert topology == Topology("westus2", "westus2-3", None)
        assert "%24expand=instanceView" in responses.calls[0].request.url or "$expand=instanceView" in responses.calls[0].request.url

    @responses.activate
    def test_unzoned_vm_falls_back_to_fault_domain(self, clock: FakeClock) -> None:
        """No zones → the instance view's platformFaultDomain (the instanceView call when GET lacks it)."""
        responses.get(f"{ARM}/virtualMachines/myVM", json=fixture_body("arm/compute/VirtualMachines_Get_AvailabilitySet_2025-04-01.json"))
        responses.get(f"{ARM}/virtualMachines/myVM/instanceView", json=fixture_body("arm/compute/VirtualMachines_InstanceView_2025-04-01.json"))
        topology = make_provider(clock).topology_by_provider_id(pid("virtualMachines/myVM"))
        assert topology == Topology("westus", "1", "1")
        assert topology is not None and not topology.is_availability_zone

    @responses.activate
    def test_neither_zone_nor_fault_domain(self, clock: FakeClock) -> None:
        """No zone and no fault domain is an error, never an empty label, and is not cached."""
        body = fixture_body("arm/compute/VirtualMachines_Get_AvailabilitySet_2025-04-01.json")
        responses.get(f"{ARM}/virtualMachines/myVM", json=body)
        responses.get(f"{ARM}/virtualMachines/myVM/instanceView", json={"statuses": []})
        prov = make_provider(clock)
        for _ in range(2):
            with pytest.raises(errors.ZoneUnavailable, match="neither a zone nor a fault domain"):
                prov.topology_by_provider_id(pid("virtualMachines/myVM"))
        assert prov.arm_calls.total == 4

    @responses.activate
    def test_not_found(self, clock: FakeClock) -> None:
        """A 404 is NodeNotFound naming the VM."""
        responses.get(f"{ARM}/virtualMachines/gone", status=404, json={"error": {"code": "ResourceNotFound", "message": "not found"}})
        with pytest.raises(errors.NodeNotFound, match="gone"):
            make_provider(clock).topology_by_provider_id(pid("virtualMachines/gone"))

    @responses.activate
    def test_cached_within_ttl(self, clock: FakeClock) -> None:
        """A second lookup within the VM TTL makes no call; after it, one."""
        responses.get(f"{ARM}/virtualMachines/myVM", json=zoned_vm())
        prov = make_provider(clock)
        prov.topology_by_provider_id(pid("virtualMachines/myVM"))
        prov.topology_by_provider_id(pid("virtualMachines/myVM"))
        assert prov.arm_calls.total == 1
        clock.advance(61)
        prov.topology_by_provider_id(pid("virtualMachines/myVM"))
        assert prov.arm_calls.total == 2

    @responses.activate
    def test_foreign_provider_id(self, clock: FakeClock) -> None:
        """Another cloud's node is not ours: None, no call."""
        prov = make_provider(clock)
        assert prov.topology_by_provider_id("aws:///us-east-1a/i-0abc") is None
        assert prov.arm_calls.total == 0

    @responses.activate
    def test_invalid_zone_from_arm(self, clock: FakeClock) -> None:
        """A placeholder zone like 'a' is InvalidZone quoting the zones."""
        responses.get(f"{ARM}/virtualMachines/myVM", json=zoned_vm() | {"zones": ["a"]})
        with pytest.raises(errors.InvalidZone, match=r"\['a'\]"):
            make_provider(clock).topology_by_provider_id(pid("virtualMachines/myVM"))


class TestScaleSetLookups:
    """Uniform VMSS instances resolve from one cached list per scale set."""

    @responses.activate
    def test_thousand_nodes_one_list(self, clock: FakeClock) -> None:
        """1,000 VMSS nodes in 2 scale sets cost exactly 2 ARM calls."""
        for ss in ("ssa", "ssb"):
            items = [vmss_vm(i, str(i % 3 + 1), f"{ss}{i:06x}") for i in range(500)]
            responses.get(f"{ARM}/virtualMachineScaleSets/{ss}/virtualMachines", json={"value": items})
        prov = make_provider(clock)
        zones = set()
        for ss in ("ssa", "ssb"):
            for i in range(500):
                topology = prov.topology_by_provider_id(pid(f"virtualMachineScaleSets/{ss}/virtualMachines/{i}"))
                assert topology is not None and topology.zone == f"westus2-{i % 3 + 1}"
                zones.add(topology.zone)
        assert prov.arm_calls.total == 2 and zones == {"westus2-1", "westus2-2", "westus2-3"}
        assert "instanceView" in responses.calls[0].request.url

    @responses.activate
    def test_miss_refreshes_once(self, clock: FakeClock) -> None:
        """An instance missing from the cached list triggers one relist, then NodeNotFound."""
        url = f"{ARM}/virtualMachineScaleSets/ss/virtualMachines"
        responses.get(url, json={"value": [vmss_vm(0, "1", "ss000000")]})
        responses.get(url, json={"value": [vmss_vm(0, "1", "ss000000"), vmss_vm(1, "2", "ss000001")]})
        prov = make_provider(clock)
        prov.topology_by_provider_id(pid("virtualMachineScaleSets/ss/virtualMachines/0"))
        clock.advance(3)
        topology = prov.topology_by_provider_id(pid("virtualMachineScaleSets/ss/virtualMachines/1"))
        assert topology is not None and topology.zone == "westus2-2" and prov.arm_calls.total == 2
        clock.advance(3)
        with pytest.raises(errors.NodeNotFound, match="ss"):
            prov.topology_by_provider_id(pid("virtualMachineScaleSets/ss/virtualMachines/7"))
        assert prov.arm_calls.total == 3

    @responses.activate
    def test_unzoned_instance_fault_domain(self, clock: FakeClock) -> None:
        """An unzoned VMSS instance gets its fault domain, not a zone."""
        responses.get(f"{ARM}/virtualMachineScaleSets/ss/virtualMachines", json={"value": [vmss_vm(4, None, "ss000004", 2)]})
        topology = make_provider(clock).topology_by_provider_id(pid("virtualMachineScaleSets/ss/virtualMachines/4"))
        assert topology == Topology("westus2", "2", "2")

    @responses.activate
    def test_spec_list_example(self, clock: FakeClock) -> None:
        """The spec's MaximumSet list (placeholder zone 'a') deserialises and yields InvalidZone, not a crash."""
        body = fixture_body("arm/compute/VirtualMachineScaleSetVMs_List_MaximumSet_ZonesInstanceView_2025-04-01.json")
        body.pop("nextLink")
        body["value"][0]["instanceId"] = "5"
        responses.get(f"{ARM}/virtualMachineScaleSets/ss/virtualMachines", json=body)
        with pytest.raises(errors.InvalidZone, match=r"\['a'\]"):
            make_provider(clock).topology_by_provider_id(pid("virtualMachineScaleSets/ss/virtualMachines/5"))


class TestNodeNameLookups:
    """Node names resolve to VMSS instances by computer-name prefix, else to VMs by computer name."""

    @responses.activate
    def test_uniform_by_computer_name(self, clock: FakeClock) -> None:
        """'myvirtualmachinescaleset00000a' is instance 10 of the scale set with that computerNamePrefix."""
        responses.get(f"{ARM}/virtualMachineScaleSets", json={"value": [fixture_body("arm/compute/VirtualMachineScaleSets_Get_WithUserData_2025-04-01.json")]})
        responses.get(f"{ARM}/virtualMachineScaleSets/myVirtualMachineScaleSet/virtualMachines",
                      json={"value": [vmss_vm(10, "2", "myvirtualmachinescaleset00000a")]})
        topology = make_provider(clock).topology_by_node_name("myVirtualMachineScaleSet00000A")
        assert topology.zone == "westus2-2"

    @responses.activate
    def test_flex_or_standalone_by_computer_name(self, clock: FakeClock) -> None:
        """A node name that is no scale set's prefix is found in the group's VM list, then read with its instance view."""
        responses.get(f"{ARM}/virtualMachineScaleSets", json={"value": []})
        listed = zoned_vm()
        responses.get(f"{ARM}/virtualMachines", json={"value": [listed]})
        responses.get(f"{ARM}/virtualMachines/myVM", json=listed)
        topology = make_provider(clock).topology_by_node_name("myvm")
        assert topology.zone == "westus2-3"

    @responses.activate
    def test_unknown_node(self, clock: FakeClock) -> None:
        """A name nobody has is NodeNotFound naming it and the group."""
        responses.get(f"{ARM}/virtualMachineScaleSets", json={"value": []})
        responses.get(f"{ARM}/virtualMachines", json={"value": []})
        with pytest.raises(errors.NodeNotFound, match="'ghost-node'.*'rg'"):
            make_provider(clock, vmType="standard").topology_by_node_name("ghost-node")


class TestThrottling:
    """A 429 closes the read gate until Retry-After passes; 5xx are retried within a budget."""

    @responses.activate
    def test_429_gates_reads(self, clock: FakeClock) -> None:
        """After a 429 with Retry-After: 30, reads fail fast for 30 s without a request."""
        responses.get(f"{ARM}/virtualMachines/myVM", status=429, headers={"Retry-After": "30"},
                      json={"error": {"code": "TooManyRequests", "message": "slow down"}})
        prov = make_provider(clock)
        with pytest.raises(errors.CloudApiError) as info:
            prov.topology_by_provider_id(pid("virtualMachines/myVM"))
        assert info.value.status == 429 and info.value.retry_after == 30
        assert clock.sleeps == []
        clock.advance(10)
        with pytest.raises(errors.CloudApiError, match="throttled") as gated:
            prov.topology_by_provider_id(pid("virtualMachines/other"))
        assert gated.value.retry_after == pytest.approx(20)
        assert prov.arm_calls.total == 1 and prov.arm_calls.throttled == 1
        responses.replace(responses.GET, f"{ARM}/virtualMachines/myVM", json=zoned_vm())
        clock.advance(21)
        assert prov.topology_by_provider_id(pid("virtualMachines/myVM")) is not None
        assert prov.arm_calls.total == 2

    @responses.activate
    def test_5xx_retried_then_succeeds(self, clock: FakeClock) -> None:
        """A 503 is retried (bounded) and the lookup succeeds."""
        responses.get(f"{ARM}/virtualMachines/myVM", status=503)
        responses.get(f"{ARM}/virtualMachines/myVM", json=zoned_vm())
        assert make_provider(clock).topology_by_provider_id(pid("virtualMachines/myVM")) is not None
        assert len(responses.calls) == 2

    @responses.activate
    def test_5xx_budget_exhausted(self, clock: FakeClock) -> None:
        """Persistent 500s fail loudly after 1 + 3 attempts with CloudApiError(status=500)."""
        responses.get(f"{ARM}/virtualMachines/myVM", status=500, json={"error": {"code": "InternalError", "message": "boom"}})
        with pytest.raises(errors.CloudApiError, match="HTTP 500") as info:
            make_provider(clock).topology_by_provider_id(pid("virtualMachines/myVM"))
        assert info.value.status == 500 and len(responses.calls) == 4

    @responses.activate
    def test_long_retry_after_on_503_not_waited(self, clock: FakeClock) -> None:
        """A Retry-After beyond the cap is not slept through: the call fails with retry_after set."""
        responses.get(f"{ARM}/virtualMachines/myVM", status=503, headers={"Retry-After": "600"})
        with pytest.raises(errors.CloudApiError) as info:
            make_provider(clock).topology_by_provider_id(pid("virtualMachines/myVM"))
        assert info.value.retry_after == 600 and clock.sleeps == []


LIST_EXAMPLES = [
    "VirtualMachineScaleSetVMs_List_MaximumSet_ZonesInstanceView_2025-04-01.json",
    "VirtualMachineScaleSetVMs_List_MinimumSet_2025-04-01.json",
    "VirtualMachineScaleSetVMs_List_FlexWithVirtualMachineResourceId_2025-04-01.json",
]
"""The REST-spec examples of a scale set's instance list (fixtures/arm/compute)."""


class TestRawInstances:
    """The hot list reads ARM's JSON directly; it must read exactly what the SDK's models say."""

    @pytest.mark.parametrize("fixture", LIST_EXAMPLES)
    def test_same_as_sdk_models(self, fixture: str) -> None:
        """For every item of the REST-spec examples, raw parsing == parsing the SDK model."""
        from azure.mgmt.compute import models

        from providers.azure import compute

        items = fixture_body(f"arm/compute/{fixture}")["value"]
        assert items
        for item in items:
            assert compute._instance_json(item) == compute._instance(models.VirtualMachineScaleSetVM(item))


def _schema(hint: Any) -> Any:
    """The shapes schema a TypedDict hint says the same as (null as absent)."""
    if isinstance(hint, types.UnionType):
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if typing.get_origin(hint) is list:
        return shapes.ListOf(_schema(typing.get_args(hint)[0]))
    if typing.is_typeddict(hint):
        return {name: _schema(inner) for name, inner in typing.get_type_hints(hint).items()}
    return hint


class TestInstancePages:
    """A page of the hot list is read typed, field by field: the same instances as reading it whole."""

    @pytest.mark.parametrize("fixture", LIST_EXAMPLES)
    def test_typed_read_is_the_whole_read(self, fixture: str) -> None:
        """The REST-spec examples read typed (not by the fallback) give what the whole JSON gives."""
        from providers.azure import compute

        body = json.dumps(fixture_body(f"arm/compute/{fixture}")).encode()
        typed, whole = compute._read_page(body), json.loads(body)
        assert [compute._instance_json(item) for item in typed["value"]] == \
            [compute._instance_json(item) for item in whole["value"]]

    def test_typed_fields_are_the_checked_fields(self) -> None:
        """The TypedDicts read and the shapes schema checked on the fallback name the same fields and types."""
        from providers.azure import compute

        assert _schema(compute._Page) == compute._PAGE

    def test_not_utf8_where_nothing_is_read(self) -> None:
        """Bytes that are not UTF-8 are refused even in a field the typed read skips."""
        from providers.azure import compute

        with pytest.raises(ValueError, match="utf-8"):
            compute._page(b'{"value": [], "skipped": "\xff\xfe"}')

    def test_fallback_names_the_field(self) -> None:
        """A page the typed read refuses is read whole, and the error names the field in shapes' words."""
        from providers.azure import compute

        with pytest.raises(shapes.ShapeError, match=r"value\[1\]\.zones\[0\]: expected a string"):
            compute._page(b'{"value": [{"name": "a"}, {"zones": [1]}]}')
