"""Tests for backend-pool membership rules and the Basic-SKU-with-zones check (pure, no ARM)."""

from __future__ import annotations

from typing import Any

import pytest

from cloudzones import errors
from providers.azure import AzureConfig
from providers.azure.lb_members import backend_pool_members, check_sku_for_zones
from providers.azure.lb_plan import BackendPool, PoolAddress

SUB = "00000000-0000-0000-0000-0000000000cc"
VNET = f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"


def node(name: str, *, zone: str = "eastus-1", provider_id: str | None = "vm", ip: str = "10.0.0.4",
         ready: str | None = None, taints: list[dict[str, str]] | None = None, **labels: str) -> dict[str, Any]:
    """A Node manifest; provider_id 'vm'/'vmss' builds an Azure one, labels use '__' for '/' and '_' for '.'."""
    pid = {"vm": f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}",
           "vmss": f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3"
           }.get(provider_id or "", provider_id)
    spec: dict[str, Any] = {} if pid is None else {"providerID": pid}
    if taints:
        spec["taints"] = taints
    status: dict[str, Any] = {"addresses": [{"type": "Hostname", "address": name}] + (
        [{"type": "InternalIP", "address": ip}] if ip else [])}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    all_labels = {"topology.kubernetes.io/zone": zone} | {k.replace("__", "/").replace("_", "."): v
                                                          for k, v in labels.items()}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": all_labels},
            "spec": spec, "status": status}


def config(**values: Any) -> AzureConfig:
    """A cloud config in eastus, group rg."""
    return AzureConfig.from_mapping({"location": "eastus", "resourceGroup": "rg"} | values, environ={})


CONTROL_PLANE = {"node-role_kubernetes_io__control-plane": ""}
MASTER = {"node-role_kubernetes_io__master": ""}
LEGACY_MASTER = {"kubernetes_io__role": "master"}
EXCLUDE = {"node_kubernetes_io__exclude-from-external-load-balancers": "true"}


class TestBackendPoolMembers:
    """backend_pool_members: which nodes go in the pool, and why the others do not."""

    def test_kinds_zone_and_address(self) -> None:
        """VMs and scale-set instances are members with their zone, machine ID and IPv4 InternalIP."""
        dual = node("b", provider_id="vmss", zone="")
        dual["metadata"]["labels"] = {"failure-domain.beta.kubernetes.io/zone": "eastus-2"}
        dual["status"]["addresses"] = [{"type": "InternalIP", "address": "fd00::5"},
                                       {"type": "InternalIP", "address": "10.0.0.5"}]
        result = backend_pool_members([node("a"), dual], config())
        assert [(m.node, m.kind, m.zone, m.address) for m in result.members] == [
            ("a", "vm", "eastus-1", "10.0.0.4"), ("b", "vmss-instance", "eastus-2", "10.0.0.5")]
        assert result.members[1].machine.endswith("/virtualMachineScaleSets/ss/virtualMachines/3")
        assert result.excluded == ()

    @pytest.mark.parametrize("role", [CONTROL_PLANE, MASTER, LEGACY_MASTER])
    def test_control_plane_excluded_by_default(self, role: dict[str, str]) -> None:
        """control-plane, master and kubernetes.io/role=master nodes are excluded while excludeMasterFromStandardLB."""
        result = backend_pool_members([node("cp", **role), node("w")], config())
        assert [m.node for m in result.members] == ["w"]
        assert result.excluded[0].reasons == ("control-plane node (excludeMasterFromStandardLB is true)",)

    @pytest.mark.parametrize("settings", [{"excludeMasterFromStandardLB": "false"}, {"loadBalancerSku": "basic"}])
    def test_control_plane_included_when_not_excluded(self, settings: dict[str, str]) -> None:
        """excludeMasterFromStandardLB: false (or a Basic SKU, where it does not apply) keeps control planes in."""
        result = backend_pool_members([node("cp", **CONTROL_PLANE), node("m", **MASTER)], config(**settings))
        assert [m.node for m in result.members] == ["cp", "m"]

    def test_exclude_label_always_wins(self) -> None:
        """The exclude-from-external-load-balancers label excludes even with excludeMasterFromStandardLB false."""
        result = backend_pool_members([node("cp", **CONTROL_PLANE, **EXCLUDE)],
                                      config(excludeMasterFromStandardLB=False))
        assert result.members == ()
        assert result.excluded[0].reasons == ("labelled node.kubernetes.io/exclude-from-external-load-balancers",)

    def test_every_reason_listed(self) -> None:
        """A node excluded for several reasons lists them all."""
        result = backend_pool_members([node("x", provider_id="", **CONTROL_PLANE, **EXCLUDE)], config())
        assert result.excluded[0].reasons == (
            "labelled node.kubernetes.io/exclude-from-external-load-balancers",
            "control-plane node (excludeMasterFromStandardLB is true)",
            "provider ID is empty: the node is not initialized yet")

    @pytest.mark.parametrize(("manifest", "reason"), [
        (node("u", **{"kubernetes_azure_com__managed": "False"}), "not managed by Azure"),
        (node("g", **{"kubernetes_azure_com__resource-group": "other"}), "external resource group 'other'"),
        (node("r", ready="False"), "not Ready"),
        (node("n", provider_id=None), "not initialized"),
        (node("k", provider_id="kind://docker/k/k"), "'kind://docker/k/k' is not an Azure machine"),
        (node("m", provider_id="azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d"),
         "names a disk"),
    ])
    def test_other_exclusions(self, manifest: dict[str, Any], reason: str) -> None:
        """Unmanaged, other-group, NotReady, uninitialised, foreign and malformed nodes are excluded, with why."""
        result = backend_pool_members([manifest], config())
        assert result.members == () and reason in "; ".join(result.excluded[0].reasons)

    def test_other_group_by_provider_id(self) -> None:
        """A node whose provider ID names another resource group is excluded without any label saying so."""
        other = f"azure:///subscriptions/{SUB}/resourceGroups/Elsewhere/providers/Microsoft.Compute/virtualMachines/x"
        same = f"azure:///subscriptions/{SUB}/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/y"
        result = backend_pool_members([node("x", provider_id=other), node("y", provider_id=same)], config())
        assert [m.node for m in result.members] == ["y"]
        assert result.excluded[0].reasons == (
            "in resource group 'Elsewhere' by its provider ID, not the cloud config's 'rg'",)

    def test_duplicate_provider_ids(self) -> None:
        """Nodes sharing a provider ID (any case) are reported; the machine is a member once, by its first node."""
        twin = node("b", provider_id="vmss")
        twin["spec"]["providerID"] = twin["spec"]["providerID"].upper().replace("AZURE://", "azure://")
        result = backend_pool_members([node("a", provider_id="vmss"), twin, node("c", provider_id="vmss"),
                                       node("d")], config())
        assert [m.node for m in result.members] == ["a", "d"]
        assert [(e.node, e.reasons) for e in result.excluded] == [
            ("b", ("same provider ID as node 'a': the pool holds each machine once",)),
            ("c", ("same provider ID as node 'a': the pool holds each machine once",))]
        assert [d.nodes for d in result.duplicates] == [("a", "b", "c")]
        assert result.duplicates[0].provider_id.endswith("/virtualMachineScaleSets/ss/virtualMachines/3")

    def test_new_not_ready_node_stays(self) -> None:
        """A NotReady node still carrying the uninitialized taint stays in (upstream #851); no conditions = ready."""
        taint = [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule"}]
        result = backend_pool_members([node("new", ready="False", taints=taint), node("plain")], config())
        assert [m.node for m in result.members] == ["new", "plain"]

    def test_pool_from_members(self) -> None:
        """An IP-based pool takes the members that report an address, named after their nodes."""
        members = backend_pool_members([node("a"), node("b", ip="")], config()).members
        assert BackendPool.for_members("p", members, virtual_network=VNET) == BackendPool(
            "p", (PoolAddress("a", "10.0.0.4"),), VNET)


class TestBasicSkuWithZones:
    """loadBalancerSku: basic is refused when nodes are in availability zones."""

    def test_basic_with_zoned_nodes(self) -> None:
        """The error names the zoned nodes and says zones need Standard."""
        with pytest.raises(errors.ConfigError) as info:
            check_sku_for_zones(config(loadBalancerSku="basic"), [node("a"), node("b", zone="0")])
        message = str(info.value)
        assert "a (eastus-1)" in message and "b (" not in message
        assert "availability zones need loadBalancerSku: standard" in message

    def test_basic_without_zones_ok(self) -> None:
        """Fault-domain labels and other regions' zones are not availability zones of the region."""
        check_sku_for_zones(config(loadBalancerSku="basic"), [node("a", zone="0"), node("b", zone="westus-1")])

    def test_standard_with_zones_ok(self) -> None:
        """Standard with zoned nodes is the supported setup."""
        check_sku_for_zones(config(), [node("a")])

    def test_region_from_nodes_without_location(self) -> None:
        """Without a configured location the nodes' region label decides what a zone is."""
        manifest = node("a", **{"topology_kubernetes_io__region": "eastus"})
        basic = AzureConfig.from_mapping({"loadBalancerSku": "basic"}, environ={})
        with pytest.raises(errors.ConfigError, match="a \\(eastus-1\\)"):
            check_sku_for_zones(basic, [manifest])

    def test_region_from_zone_labels(self) -> None:
        """With neither location nor region labels, '<region>-<n>' zone labels imply the region."""
        basic = AzureConfig.from_mapping({"loadBalancerSku": "basic"}, environ={})
        with pytest.raises(errors.ConfigError, match="2 node\\(s\\)"):
            check_sku_for_zones(basic, [node("a", zone="0"), node("b"), node("c", zone="eastus-3")])
