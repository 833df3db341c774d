"""Tests for explain_zones / select_zones / choose_zones: the choice order and its errors."""

from __future__ import annotations

import collections
from typing import Any

import pytest

import storageclass
from cloudzones import errors, labels
from storageclass import Rule, StorageClassSpec

EASTUS = ["eastus-1", "eastus-2", "eastus-3"]


def spec(parameters: dict[str, str] | None = None, *, binding: str | None = None,
         allowed: list[str] | None = None, region: str | None = "eastus") -> StorageClassSpec:
    """A validated class named 'fast'."""
    manifest: dict[str, Any] = {"kind": "StorageClass", "metadata": {"name": "fast"},
                                "parameters": parameters or {}}
    if binding:
        manifest["volumeBindingMode"] = binding
    if allowed is not None:
        manifest["allowedTopologies"] = [{"matchLabelExpressions": [{"key": labels.ZONE, "values": allowed}]}]
    return StorageClassSpec.from_manifest(manifest, region=region)


def node(name: str, node_labels: dict[str, str]) -> dict[str, Any]:
    """A node manifest with labels."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}}


WFFC = spec(binding="WaitForFirstConsumer")


class TestChoiceOrder:
    """Each rule decides in the issue's order, and says so."""

    def test_zone_redundant_first(self) -> None:
        """A ZRS SKU gets no zone, whatever else is known."""
        choice = storageclass.explain_zones(spec({"skuName": "Premium_ZRS"}, binding="WaitForFirstConsumer"),
                                            pvc_name="data-0", active_zones=EASTUS,
                                            selected_node=node("n", {labels.ZONE: "0"}))
        assert (choice.zones, choice.rule) == ((), Rule.ZONE_REDUNDANT)
        assert "Premium_ZRS" in choice.reason

    def test_unzoned(self) -> None:
        """zoned=false gets no zone, even with zoned nodes around."""
        choice = storageclass.explain_zones(spec({"zoned": "false"}), pvc_name="data-0", active_zones=EASTUS)
        assert (choice.zones, choice.rule) == ((), Rule.UNZONED)

    def test_unzoned_on_unzoned_node(self) -> None:
        """zoned=false with an unzoned selected node is fine."""
        assert storageclass.select_zones(spec({"zoned": "false"}), pvc_name="data-0", active_zones=[],
                                         selected_node=node("n", {labels.ZONE: "36"})) == []

    def test_unzoned_disk_on_zoned_node_refused(self) -> None:
        """zoned=false but the scheduler picked a zoned node: the disk could never attach."""
        with pytest.raises(errors.InvalidStorageClass) as info:
            storageclass.select_zones(spec({"zoned": "false"}), pvc_name="data-0", active_zones=EASTUS,
                                      selected_node=node("n1", {labels.ZONE: "eastus-2"}))
        assert info.value.rule == Rule.UNZONED_DISK_ON_ZONED_NODE.value
        assert "'n1'" in str(info.value) and "eastus-2" in str(info.value)

    @pytest.mark.parametrize(("node_labels", "expected"), [
        ({labels.ZONE: "eastus-2"}, "eastus-2"),
        ({labels.BETA_ZONE: "eastus-3"}, "eastus-3"),
        ({labels.ZONE: "eastus-2", labels.BETA_ZONE: "eastus-3"}, "eastus-2"),
        ({labels.ZONE: "", labels.BETA_ZONE: "eastus-3"}, "eastus-3"),
    ])
    def test_selected_node(self, node_labels: dict[str, str], expected: str) -> None:
        """WaitForFirstConsumer: the node's GA zone label, then the beta one."""
        choice = storageclass.explain_zones(WFFC, pvc_name="data-0", active_zones=EASTUS,
                                            selected_node=node("n1", node_labels))
        assert (choice.zones, choice.rule) == ((expected,), Rule.SELECTED_NODE)
        assert "'n1'" in choice.reason

    def test_selected_node_wins_over_allowed_topologies(self) -> None:
        """The scheduler already honoured allowedTopologies, so the node's zone is used as is."""
        chosen = storageclass.select_zones(spec(binding="WaitForFirstConsumer", allowed=["eastus-1"]),
                                           pvc_name="data-0", active_zones=[],
                                           selected_node=node("n", {labels.ZONE: "eastus-3"}))
        assert chosen == ["eastus-3"]

    def test_selected_node_region_from_its_label(self) -> None:
        """Without a configured region, the node's region label decides what is a zone."""
        chosen = storageclass.select_zones(spec(binding="WaitForFirstConsumer", region=None), pvc_name="d-0",
                                           active_zones=[],
                                           selected_node=node("n", {labels.ZONE: "westus-1",
                                                                    labels.REGION: "westus"}))
        assert chosen == ["westus-1"]

    @pytest.mark.parametrize(("node_labels", "fragment"), [
        ({}, "neither"),
        ({labels.FAULT_DOMAIN: "36"}, "unzoned"),
        ({labels.ZONE: "0"}, "fault domain"),
        ({labels.ZONE: "36", labels.FAULT_DOMAIN: "36"}, "zoned disks cannot attach to unzoned nodes"),
        ({labels.BETA_ZONE: "1"}, "fault domain"),
        ({labels.ZONE: "westus-1"}, "not an availability zone of region 'eastus'"),
    ])
    def test_selected_node_refused(self, node_labels: dict[str, str], fragment: str) -> None:
        """A node without a zone label, or an unzoned one, cannot host a zoned disk."""
        with pytest.raises(errors.NoZonedNodes) as info:
            storageclass.select_zones(WFFC, pvc_name="data-0", active_zones=EASTUS,
                                      selected_node=node("n7", node_labels))
        assert info.value.rule == Rule.SELECTED_NODE.value
        assert fragment in str(info.value) and "'n7'" in str(info.value) and "'data-0'" in str(info.value)

    def test_selected_node_with_zone_parameter(self) -> None:
        """A selected node with a zone parameter (an Immediate class handed a node) is refused."""
        with pytest.raises(errors.InvalidStorageClass) as info:
            storageclass.select_zones(spec({"zone": "eastus-1"}), pvc_name="data-0", active_zones=EASTUS,
                                      selected_node=node("n", {labels.ZONE: "eastus-2"}))
        assert info.value.rule == Rule.ZONE_WITH_WAIT_FOR_FIRST_CONSUMER.value

    def test_allowed_topologies_prefers_zones_with_nodes(self) -> None:
        """Among allowed zones, those with nodes are the candidates."""
        for i in range(10):
            choice = storageclass.explain_zones(spec(allowed=["eastus-1", "eastus-3"]), pvc_name=f"data-web-{i}",
                                                active_zones=["eastus-2", "eastus-3", "0"])
            assert (choice.zones, choice.rule, choice.candidates) == \
                (("eastus-3",), Rule.ALLOWED_TOPOLOGIES, ("eastus-3",))
            assert choice.ignored == ("0",)

    def test_allowed_topologies_without_nodes(self) -> None:
        """No allowed zone has nodes: the whole allowed set, spread round-robin."""
        seen = collections.Counter()
        for i in range(6):
            choice = storageclass.explain_zones(spec(allowed=["eastus-1", "eastus-3"]), pvc_name=f"data-web-{i}",
                                                active_zones=["eastus-2"])
            assert choice.rule == Rule.ALLOWED_TOPOLOGIES_WITHOUT_NODES
            assert choice.candidates == ("eastus-1", "eastus-3")
            seen.update(choice.zones)
        assert seen == {"eastus-1": 3, "eastus-3": 3}

    def test_zone(self) -> None:
        """The zone parameter pins the disk, nodes or not."""
        choice = storageclass.explain_zones(spec({"zone": "eastus-3"}), pvc_name="data-0", active_zones=[])
        assert (choice.zones, choice.rule) == (("eastus-3",), Rule.ZONE)

    def test_zones(self) -> None:
        """The zones parameter is round-robined, ignoring where nodes are."""
        chosen = {storageclass.explain_zones(spec({"zones": "eastus-1,eastus-2"}), pvc_name=f"data-web-{i}",
                                             active_zones=["eastus-3"]).zones for i in range(4)}
        assert chosen == {("eastus-1",), ("eastus-2",)}

    def test_active_zones(self) -> None:
        """Nothing else given: round-robin over zones with nodes, fault domains and other regions ignored."""
        active = ["eastus-1", "0", "36", "eastus-2", "westus-1", "eastus-1", ""]
        choice = storageclass.explain_zones(spec(), pvc_name="data-web-0", active_zones=active)
        assert choice.rule == Rule.ACTIVE_ZONES
        assert choice.candidates == ("eastus-1", "eastus-2")
        assert choice.ignored == ("", "0", "36", "westus-1")
        second = storageclass.select_zones(spec(), pvc_name="data-web-1", active_zones=active)
        assert {choice.zones[0], second[0]} == {"eastus-1", "eastus-2"}

    def test_wait_for_first_consumer_without_node_falls_through(self) -> None:
        """WaitForFirstConsumer but no selected node: the later rules decide, as in Kubernetes."""
        choice = storageclass.explain_zones(spec(binding="WaitForFirstConsumer", allowed=["eastus-2"]),
                                            pvc_name="d-0", active_zones=EASTUS)
        assert (choice.zones, choice.rule) == (("eastus-2",), Rule.ALLOWED_TOPOLOGIES)

    def test_active_zone_order_does_not_matter(self) -> None:
        """The same claim gets the same zone whatever order the nodes are listed in."""
        for i in range(10):
            forward = storageclass.select_zones(spec(), pvc_name=f"d-web-{i}", active_zones=[*EASTUS, "0"])
            backward = storageclass.select_zones(spec(), pvc_name=f"d-web-{i}", active_zones=["0", *EASTUS[::-1]])
            assert forward == backward

    @pytest.mark.parametrize("active", [[], ["0", "1", "2"], ["36"], ["westus-1"]])
    def test_no_zoned_nodes(self, active: list[str]) -> None:
        """No availability zone with nodes: NoZonedNodes (upstream silently made an unzoned disk)."""
        with pytest.raises(errors.NoZonedNodes) as info:
            storageclass.select_zones(spec(), pvc_name="data-0", active_zones=active)
        assert info.value.rule == Rule.ACTIVE_ZONES.value
        for value in active:
            assert repr(value) in str(info.value)


class TestModes:
    """Balanced mode by default, Kubernetes' exact choice on request."""

    def test_default_is_balanced(self) -> None:
        """svc<i>-db StatefulSets spread in the default mode and pile up in Kubernetes mode."""
        balanced = collections.Counter(
            storageclass.select_zones(spec(), pvc_name=f"data-svc{i}-db-0", active_zones=EASTUS)[0]
            for i in range(1, 100))
        kube = collections.Counter(
            storageclass.select_zones(spec(), pvc_name=f"data-svc{i}-db-0", active_zones=EASTUS,
                                      mode="kubernetes")[0]
            for i in range(1, 100))
        assert max(balanced.values()) <= 45 and len(balanced) == 3
        assert list(kube.values()) == [99]

    def test_kubernetes_mode_matches_choose_zones(self) -> None:
        """Kubernetes mode gives exactly choose_zones' answer."""
        for name in ["henley", "henley-1", "medium-alpha-henley-2", "data-my-app-7"]:
            assert set(storageclass.select_zones(spec(), pvc_name=name, active_zones=EASTUS, mode="kubernetes")) \
                == storageclass.choose_zones(EASTUS, name)

    def test_choose_zones_vector(self) -> None:
        """choose_zones is ChooseZonesForVolume: henley hashes to zone index 0."""
        assert storageclass.choose_zones(["a", "b", "c"], "henley", 2) == {"a", "b"}

    def test_mode_reported(self) -> None:
        """The choice says which mode was used."""
        choice = storageclass.explain_zones(spec(), pvc_name="d-0", active_zones=EASTUS, mode="kubernetes")
        assert choice.mode == "kubernetes" and "kubernetes round-robin" in choice.reason
        assert choice.as_dict()["rule"] == "active-zones"

    def test_bad_mode(self) -> None:
        """An unknown mode is a ConfigError."""
        with pytest.raises(errors.ConfigError, match="'fair'"):
            storageclass.select_zones(spec(), pvc_name="d-0", active_zones=EASTUS, mode="fair")  # type: ignore[arg-type]

    def test_statefulset_hint(self) -> None:
        """statefulset= keeps a pod's dashed claim templates together in balanced mode."""
        for ordinal in range(6):
            zones = {storageclass.select_zones(spec(), pvc_name=f"{template}-web-{ordinal}", active_zones=EASTUS,
                                               statefulset="web")[0]
                     for template in ("www-data", "my-logs", "cache")}
            assert len(zones) == 1

    def test_kubernetes_overflow_is_an_error(self) -> None:
        """Kubernetes mode cannot place the largest ordinal (its loop bound overflows); balanced can."""
        with pytest.raises(errors.NoZonedNodes, match="overflows"):
            storageclass.select_zones(spec(), pvc_name="henley-4294967295", active_zones=EASTUS, mode="kubernetes")
        assert storageclass.select_zones(spec(), pvc_name="henley-4294967295", active_zones=EASTUS)


class TestReplicas:
    """Replicated volumes (several zones) follow SelectZonesForVolume's rules."""

    def test_zones_replicas(self) -> None:
        """Two replicas over the zones parameter give two distinct zones."""
        chosen = storageclass.select_zones(spec({"zones": "eastus-1,eastus-2,eastus-3"}), pvc_name="data-web-0",
                                           active_zones=[], replicas=2)
        assert len(chosen) == 2 and set(chosen) <= set(EASTUS)

    def test_zone_parameter_refuses_replicas(self) -> None:
        """One zone cannot hold two replicas."""
        with pytest.raises(errors.InvalidStorageClass) as info:
            storageclass.select_zones(spec({"zone": "eastus-1"}), pvc_name="d-0", active_zones=EASTUS, replicas=2)
        assert info.value.rule == Rule.ZONE_REPLICAS.value

    @pytest.mark.parametrize(("sc", "kind"), [
        (spec({"zones": "eastus-1"}), errors.InvalidStorageClass),
        (spec(allowed=["eastus-1"]), errors.InvalidStorageClass),
        (spec(), errors.NoZonedNodes),
    ])
    def test_not_enough_zones(self, sc: StorageClassSpec, kind: type[Exception]) -> None:
        """Fewer zones than replicas is an error naming the counts."""
        with pytest.raises(kind) as info:
            storageclass.select_zones(sc, pvc_name="d-0", active_zones=["eastus-1"], replicas=2)
        assert getattr(info.value, "rule", None) == Rule.NOT_ENOUGH_ZONES.value and "2" in str(info.value)

    def test_selected_node_plus_others(self) -> None:
        """WaitForFirstConsumer with replicas keeps the node's zone and adds others."""
        choice = storageclass.explain_zones(WFFC, pvc_name="d-0", active_zones=EASTUS, replicas=2,
                                            selected_node=node("n", {labels.ZONE: "eastus-2"}))
        assert "eastus-2" in choice.zones and len(choice.zones) == 2 and choice.rule == Rule.SELECTED_NODE

    def test_selected_node_not_enough_zones(self) -> None:
        """The node's zone alone cannot hold two replicas."""
        with pytest.raises(errors.NoZonedNodes) as info:
            storageclass.select_zones(WFFC, pvc_name="d-0", active_zones=["eastus-2"], replicas=2,
                                      selected_node=node("n", {labels.ZONE: "eastus-2"}))
        assert info.value.rule == Rule.NOT_ENOUGH_ZONES.value

    def test_allowed_topologies_replicas_fall_back(self) -> None:
        """Too few allowed zones with nodes: the whole allowed set is used."""
        choice = storageclass.explain_zones(spec(allowed=["eastus-1", "eastus-2"]), pvc_name="d-0",
                                            active_zones=["eastus-1"], replicas=2)
        assert choice.zones == ("eastus-1", "eastus-2") and choice.rule == Rule.ALLOWED_TOPOLOGIES_WITHOUT_NODES

    def test_bad_replicas(self) -> None:
        """Zero replicas is a ConfigError."""
        with pytest.raises(errors.ConfigError):
            storageclass.select_zones(spec(), pvc_name="d-0", active_zones=EASTUS, replicas=0)
