"""Tests for the zone-redundant Standard load balancer through azure-mgmt-network: public IPs and load balancers."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import responses

from cloudzones import errors
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from providers.azure.lb_plan import BackendPool, PoolAddress, resolve_zones
from tests.conftest import FakeClock, FakeCredential, fixture_body

SUB = "00000000-0000-0000-0000-0000000000cc"
NET = f"https://management.azure.com/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network"
PIP_ID = f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/web-pip"
VNET = f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"
PIP_FIXTURE = "arm/network/PublicIPAddresses_CreateOrUpdate_StandardZones_2025-03-01.json"
LB_FIXTURE = "arm/network/LoadBalancers_CreateOrUpdate_StandardZones_2025-03-01.json"
NOT_FOUND = {"error": {"code": "ResourceNotFound", "message": "The Resource was not found."}}
THROTTLED = {"error": {"code": "TooManyRequests", "message": "slow down"}}


def make_provider(clock: FakeClock, **config: Any) -> AzureProvider:
    """A provider for subscription SUB, group rg, region eastus, with no real waits."""
    cfg = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "eastus"} | config,
                                   environ={})
    return AzureProvider(cfg, credential=FakeCredential(), clock=clock, sleep=clock.sleep,
                         arm_settings=ArmSettings(backoff_factor=0.0, polling_interval=0.0))


def pip(zones: list[str] | None, status: str = "200", **sku: str) -> dict[str, Any]:
    """The spec example's public IP, made Regional (it is Global in the example) with the given zones."""
    body = copy.deepcopy(fixture_body(PIP_FIXTURE, status))
    body["sku"] = {"name": "Standard", "tier": "Regional"} | sku
    if zones is None:
        body.pop("zones")
    else:
        body["zones"] = zones
    return body


def existing_lb(**pool_props: Any) -> dict[str, Any]:
    """The spec example's Standard load balancer (frontend fe-lb in zone 1, pool be-lb, a rule, a probe)."""
    body = copy.deepcopy(fixture_body(LB_FIXTURE))
    body["properties"]["backendAddressPools"][0]["properties"].update(pool_props)
    return body


def requests_of(method: str) -> list[Any]:
    """The recorded requests with this method."""
    return [c.request for c in responses.calls if c.request.method == method]


class TestEnsurePublicIp:
    """ensure_public_ip: Standard, static, zone-redundant by default, idempotent, zones never changed."""

    @responses.activate
    def test_creates_zone_redundant_then_get_only(self, clock: FakeClock) -> None:
        """First call PUTs a Standard static IP in zones 1-3; the second call is a single GET."""
        responses.get(f"{NET}/publicIPAddresses/web-pip", status=404, json=NOT_FOUND)
        responses.put(f"{NET}/publicIPAddresses/web-pip", status=201, json=pip(["1", "2", "3"], "201"))
        responses.get(f"{NET}/publicIPAddresses/web-pip", json=pip(["1", "2", "3"]))
        provider = make_provider(clock)
        ip, action = provider.ensure_public_ip("web-pip")
        assert action == "create" and ip.zones == ("1", "2", "3") and ip.sku == "Standard"
        put = json.loads(requests_of("PUT")[0].body)
        assert put == {"location": "eastus", "sku": {"name": "Standard", "tier": "Regional"}, "zones": ["1", "2", "3"],
                       "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"}}
        before = len(responses.calls)
        again, action2 = provider.ensure_public_ip("web-pip")
        assert action2 == "none" and again == ip
        assert [c.request.method for c in responses.calls][before:] == ["GET"]

    @responses.activate
    @pytest.mark.parametrize("zone", ["2", "eastus-2", ["2"]])
    def test_single_zone(self, clock: FakeClock, zone: Any) -> None:
        """An explicit zone, as a number or a label, gives a zonal IP."""
        responses.get(f"{NET}/publicIPAddresses/web-pip", status=404, json=NOT_FOUND)
        responses.put(f"{NET}/publicIPAddresses/web-pip", status=201, json=pip(["2"], "201"))
        make_provider(clock).ensure_public_ip("web-pip", zones=zone)
        assert json.loads(requests_of("PUT")[0].body)["zones"] == ["2"]

    @responses.activate
    def test_spec_example_zone_1_matches(self, clock: FakeClock) -> None:
        """The spec example (zones ['1'], static) is accepted as is for zone 1: GET only."""
        body = fixture_body(PIP_FIXTURE)
        body = body | {"sku": {"name": "Standard"}}  # drop the example's Global tier
        responses.get(f"{NET}/publicIPAddresses/test-ip", json=body)
        ip, action = make_provider(clock).ensure_public_ip("test-ip", zones="1")
        assert action == "none" and ip.zones == ("1",) and ip.allocation == "Static"
        assert requests_of("PUT") == []

    @responses.activate
    def test_global_tier_refused(self, clock: FakeClock) -> None:
        """The verbatim spec example is a Global-tier IP, unusable for a regional load balancer."""
        responses.get(f"{NET}/publicIPAddresses/test-ip", json=fixture_body(PIP_FIXTURE))
        with pytest.raises(errors.CloudZonesError, match="Global-tier"):
            make_provider(clock).ensure_public_ip("test-ip", zones="1")

    @responses.activate
    @pytest.mark.parametrize(("have", "want", "shown"), [
        (["1"], None, "zonal \\(zone 1\\), not zone-redundant \\(1, 2, 3\\)"),
        (["1", "2", "3"], "3", "zone-redundant \\(1, 2, 3\\), not zonal \\(zone 3\\)"),
        (None, None, "no zones, not zone-redundant"),
    ])
    def test_zones_immutable(self, clock: FakeClock, have: list[str] | None, want: str | None, shown: str) -> None:
        """An existing IP in other zones is refused (zones are immutable in Azure), never PUT."""
        responses.get(f"{NET}/publicIPAddresses/web-pip", json=pip(have))
        with pytest.raises(errors.CloudZonesError, match=shown) as info:
            make_provider(clock).ensure_public_ip("web-pip", zones=want)
        assert "zones are immutable" in str(info.value) and requests_of("PUT") == []

    @responses.activate
    def test_basic_refused(self, clock: FakeClock) -> None:
        """An existing Basic IP is refused with its SKU named."""
        responses.get(f"{NET}/publicIPAddresses/web-pip", json=pip(None, name="Basic"))
        with pytest.raises(errors.CloudZonesError, match="SKU Basic; availability zones need Standard"):
            make_provider(clock).ensure_public_ip("web-pip")

    @responses.activate
    def test_update_sends_if_match(self, clock: FakeClock) -> None:
        """A needed update is a GET-modify-PUT carrying the ETag read and no read-only fields."""
        body = pip(["1", "2", "3"]) | {"etag": 'W/"abc"'}
        body["properties"] = body["properties"] | {"publicIPAllocationMethod": "Dynamic"}
        responses.get(f"{NET}/publicIPAddresses/web-pip", json=body)
        responses.put(f"{NET}/publicIPAddresses/web-pip", json=pip(["1", "2", "3"]))
        _, action = make_provider(clock).ensure_public_ip("web-pip")
        put = requests_of("PUT")[0]
        sent = json.loads(put.body)
        assert action == "update" and put.headers["If-Match"] == 'W/"abc"'
        assert sent["properties"]["publicIPAllocationMethod"] == "Static"
        assert "etag" not in sent and "provisioningState" not in sent["properties"]

    @pytest.mark.parametrize("zones", ["0", "westus-1", ["1", "2"], [], "a", "4"])
    def test_bad_zones_refused_before_arm(self, clock: FakeClock, zones: Any) -> None:
        """Fault domains, other regions' zones, two of three zones, none, junk: InvalidZone, no request."""
        provider = make_provider(clock)
        with pytest.raises(errors.InvalidZone):
            provider.ensure_public_ip("web-pip", zones=zones)
        assert provider.arm_calls.total == 0

    @responses.activate
    def test_region_zones_keyword(self, clock: FakeClock) -> None:
        """region_zones says what zone-redundant means; an empty tuple (no AZs) omits zones."""
        responses.get(f"{NET}/publicIPAddresses/web-pip", status=404, json=NOT_FOUND)
        responses.put(f"{NET}/publicIPAddresses/web-pip", status=201, json=pip(None, "201"))
        make_provider(clock).ensure_public_ip("web-pip", region_zones=())
        assert "zones" not in json.loads(requests_of("PUT")[0].body)
        assert resolve_zones(None, region="eastus", region_zones=("2", "1")) == ("1", "2")

    @responses.activate
    def test_429_closes_writes(self, clock: FakeClock) -> None:
        """A 429 on the PUT raises CloudApiError(retry_after=7); writes then fail fast, reads still go out."""
        responses.get(f"{NET}/publicIPAddresses/web-pip", status=404, json=NOT_FOUND)
        responses.put(f"{NET}/publicIPAddresses/web-pip", status=429, headers={"Retry-After": "7"}, json=THROTTLED)
        provider = make_provider(clock)
        with pytest.raises(errors.CloudApiError) as info:
            provider.ensure_public_ip("web-pip")
        assert info.value.status == 429 and info.value.retry_after == 7 and clock.sleeps == []
        clock.advance(2)
        with pytest.raises(errors.CloudApiError, match="writes are throttled") as gated:
            provider.ensure_public_ip("web-pip")
        assert gated.value.retry_after == pytest.approx(5)
        assert len(requests_of("PUT")) == 1 and len(requests_of("GET")) == 2 and provider.arm_calls.throttled == 1


class TestEnsureLoadBalancer:
    """ensure_load_balancer: Standard, one frontend per public IP, idempotent, keeps what it does not own."""

    @responses.activate
    def test_creates_standard_lb(self, clock: FakeClock) -> None:
        """A new LB gets Standard SKU, a frontend on the public IP and the IP-based pool."""
        responses.get(f"{NET}/loadBalancers/lb", status=404, json=NOT_FOUND)
        responses.put(f"{NET}/loadBalancers/lb", status=201, json=fixture_body(LB_FIXTURE, "201"))
        pool = BackendPool("be-lb", (PoolAddress("node-a", "10.0.0.4"),), VNET)
        lb, action = make_provider(clock).ensure_load_balancer("lb", frontend_ip="web-pip", backend_pool=pool)
        assert action == "create" and lb.sku == "Standard" and "be-lb" in lb.pools
        put = json.loads(requests_of("PUT")[0].body)
        assert put["sku"] == {"name": "Standard", "tier": "Regional"} and put["location"] == "eastus"
        assert put["properties"]["frontendIPConfigurations"] == [
            {"name": "web-pip", "properties": {"publicIPAddress": {"id": PIP_ID}}}]
        assert put["properties"]["backendAddressPools"] == [{"name": "be-lb", "properties": {
            "loadBalancerBackendAddresses": [{"name": "node-a", "properties": {
                "ipAddress": "10.0.0.4", "virtualNetwork": {"id": VNET}}}]}}]

    @responses.activate
    def test_adds_frontend_keeps_rest_then_get_only(self, clock: FakeClock) -> None:
        """On the spec example: one PUT adding our frontend (If-Match, rules kept); the next call is GET only."""
        original = existing_lb()
        responses.get(f"{NET}/loadBalancers/lb", json=original)
        responses.put(f"{NET}/loadBalancers/lb", json=original)  # replaced below with what was sent
        provider = make_provider(clock)
        _, action = provider.ensure_load_balancer("lb", frontend_ip=PIP_ID, backend_pool="be-lb")
        put = requests_of("PUT")[0]
        sent = json.loads(put.body)
        assert action == "update" and put.headers["If-Match"] == original["etag"]
        names = [f["name"] for f in sent["properties"]["frontendIPConfigurations"]]
        assert names == ["fe-lb", "web-pip"]
        for kept in ("loadBalancingRules", "probes", "inboundNatRules", "backendAddressPools"):
            assert [x["name"] for x in sent["properties"][kept]] == [x["name"] for x in original["properties"][kept]]
            for sent_item, had in zip(sent["properties"][kept], original["properties"][kept], strict=True):
                assert sent_item["properties"].items() <= had["properties"].items()
        assert sent["properties"]["loadBalancingRules"][0]["properties"]["frontendPort"] == 80
        assert "provisioningState" not in json.dumps(sent) and "etag" not in json.dumps(sent)
        updated = sent | {"etag": 'W/"2"'}
        responses.replace(responses.GET, f"{NET}/loadBalancers/lb", json=updated)
        before = len(responses.calls)
        lb, action2 = provider.ensure_load_balancer("lb", frontend_ip="web-pip", backend_pool="be-lb")
        assert action2 == "none" and lb.frontends["web-pip"] == PIP_ID
        assert [c.request.method for c in responses.calls][before:] == ["GET"]

    @responses.activate
    def test_pool_addresses_replaced_when_different(self, clock: FakeClock) -> None:
        """Pool addresses are set to exactly the members: added, changed and removed nodes are named."""
        have = [{"name": n, "properties": {"ipAddress": ip, "virtualNetwork": {"id": VNET}}}
                for n, ip in (("a", "10.0.0.4"), ("b", "10.0.0.5"), ("c", "10.0.0.6"))]
        body = existing_lb(loadBalancerBackendAddresses=have)
        body["properties"]["frontendIPConfigurations"].append(
            {"name": "web-pip", "properties": {"publicIPAddress": {"id": PIP_ID.upper()}}})
        responses.get(f"{NET}/loadBalancers/lb", json=body)
        responses.put(f"{NET}/loadBalancers/lb", json=body)
        pool = BackendPool("be-lb", (PoolAddress("a", "10.0.0.4"), PoolAddress("c", "10.0.0.9"),
                                     PoolAddress("d", "10.0.0.7")), VNET)
        change = _plan(make_provider(clock), frontend_ip="web-pip", backend_pool=pool)
        assert change.action == "update" and change.detail == "backend pool be-lb: add d, change c, remove b"
        assert change.body is not None and requests_of("PUT") == []
        sent = change.body["properties"]["backendAddressPools"][0]["properties"]["loadBalancerBackendAddresses"]
        assert [(a["name"], a["properties"]["ipAddress"]) for a in sent] == [
            ("a", "10.0.0.4"), ("c", "10.0.0.9"), ("d", "10.0.0.7")]

    @responses.activate
    def test_basic_lb_refused(self, clock: FakeClock) -> None:
        """An existing Basic LB is refused: Azure cannot change its SKU in place."""
        responses.get(f"{NET}/loadBalancers/lb", json=existing_lb() | {"sku": {"name": "Basic"}})
        with pytest.raises(errors.CloudZonesError, match="SKU Basic.*cannot change a load balancer's SKU"):
            make_provider(clock).ensure_load_balancer("lb", frontend_ip="web-pip", backend_pool="be-lb")
        assert requests_of("PUT") == []

    @responses.activate
    def test_frontend_name_taken(self, clock: FakeClock) -> None:
        """A frontend of our name on another address is never moved."""
        responses.get(f"{NET}/loadBalancers/lb", json=existing_lb())
        with pytest.raises(errors.CloudZonesError, match="frontend 'fe-lb' .* already points at a private address"):
            make_provider(clock).ensure_load_balancer("lb", frontend_ip=PIP_ID.replace("web-pip", "fe-lb"),
                                                      backend_pool="be-lb")

    @responses.activate
    def test_nic_pool_not_mixed_with_addresses(self, clock: FakeClock) -> None:
        """A pool with NIC-based members is not given IP-based ones."""
        nic = {"id": f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n/ipConfigurations/ipconfig1"}
        responses.get(f"{NET}/loadBalancers/lb", json=existing_lb(backendIPConfigurations=[nic]))
        pool = BackendPool("be-lb", (PoolAddress("a", "10.0.0.4"),), VNET)
        with pytest.raises(errors.CloudZonesError, match="NIC-based members"):
            make_provider(clock).ensure_load_balancer("lb", frontend_ip="fe", backend_pool=pool)

    def test_addresses_need_vnet(self) -> None:
        """IP-based members without a virtual network are a ConfigError (before any request can be made)."""
        with pytest.raises(errors.ConfigError, match="vnetName"):
            BackendPool("p", (PoolAddress("a", "10.0.0.4"),))

    def test_frontend_needed(self, clock: FakeClock) -> None:
        """A load balancer without any public IP is refused before any request."""
        provider = make_provider(clock)
        with pytest.raises(errors.ConfigError, match="at least one public IP"):
            provider.ensure_load_balancer("lb", frontend_ip=[], backend_pool="p")
        assert provider.arm_calls.total == 0

    @responses.activate
    def test_concurrent_change_412(self, clock: FakeClock) -> None:
        """ARM's 412 on If-Match becomes a CloudApiError saying the LB changed meanwhile."""
        responses.get(f"{NET}/loadBalancers/lb", json=existing_lb())
        responses.put(f"{NET}/loadBalancers/lb", status=412,
                      json={"error": {"code": "PreconditionFailed", "message": "etag mismatch"}})
        with pytest.raises(errors.CloudApiError, match="changed since it was read") as info:
            make_provider(clock).ensure_load_balancer("lb", frontend_ip="web-pip", backend_pool="be-lb")
        assert info.value.status == 412

    @responses.activate
    def test_429_shared_gate(self, clock: FakeClock) -> None:
        """A 429 on a network read closes reads for compute calls too (one gate per provider)."""
        responses.get(f"{NET}/loadBalancers/lb", status=429, headers={"Retry-After": "30"}, json=THROTTLED)
        provider = make_provider(clock)
        with pytest.raises(errors.CloudApiError) as info:
            provider.ensure_load_balancer("lb", frontend_ip="web-pip", backend_pool="be-lb")
        assert info.value.retry_after == 30
        with pytest.raises(errors.CloudApiError, match="reads are throttled"):
            provider.get_disk("d")
        assert provider.arm_calls.total == 1


def _plan(provider: AzureProvider, **kwargs: Any) -> Any:
    """Plan (GET only) the load balancer 'lb' in the provider's group."""
    from providers.azure import network

    return network.plan_load_balancer(provider.network(), resource_group="rg", location="eastus", name="lb", **kwargs)


class TestNetworkImport:
    """The network SDK is loaded only by what manages load balancers."""

    def test_zone_lookups_do_not_load_it(self) -> None:
        """Importing the provider does not import azure-mgmt-network (about 30 MB in every controller process)."""
        root = str(pathlib.Path(__file__).resolve().parent.parent)
        code = "import sys, providers.azure; print(sorted(m for m in sys.modules if m.startswith('azure.mgmt.network')))"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                              env={**os.environ, "PYTHONPATH": root}, timeout=120)
        assert done.stdout.strip() == "[]"
