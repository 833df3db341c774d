"""Tests for feasible_nodes (kube-scheduler's PodTopologySpread Filter) and plan_spread."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from placement_helpers import BAR, FOO, UNSCHEDULABLE_TAINT, expr, four_nodes, incoming, node, pod, tsc

from cloudzones import errors
from cloudzones.placement import feasible_nodes, plan_spread

A, B, X, Y = "node-a", "node-b", "node-x", "node-y"
IGNORE, HONOR = {"nodeAffinityPolicy": "Ignore"}, {"nodeTaintsPolicy": "Honor"}


def _pods(*placements: tuple[str, str, dict[str, str]]) -> list[dict[str, Any]]:
    return [pod(name, where, **labels) for name, where, labels in placements]


F = {"foo": ""}
# Rows transcribed from kubernetes/kubernetes pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go
# (TestSingleConstraint, TestMultipleConstraints): (name, pod, nodes, existing pods, nodes whose Filter succeeds).
KUBE_FILTER_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], set[str]]] = [
    ("no existing pods", incoming(F, tsc(1, "zone")), four_nodes(), [], {A, B, X, Y}),
    ("no existing pods, incoming pod doesn't match itself", incoming(F, tsc(1, "zone", BAR)), four_nodes(), [],
     {A, B, X, Y}),
    ("existing pods in a different namespace do not count", incoming(F, tsc(1, "zone")), four_nodes(),
     [pod("p-a1", A, namespace="ns1", foo=""), pod("p-b1", A, namespace="ns2", foo=""), pod("p-x1", X, foo=""),
      pod("p-y1", Y, foo="")], {A, B}),
    ("existing pods do not match null selector", incoming(F, tsc(1, "zone", None)), four_nodes(),
     _pods(("p-x1", X, F), ("p-y1", Y, F)), {A, B, X, Y}),
    ("pods spread across zones as 3/3, all nodes fit", incoming(F, tsc(1, "zone")), four_nodes(),
     _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("y1", Y, F), ("y2", Y, F), ("y3", Y, F)), {A, B, X, Y}),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b", incoming(F, tsc(1, "zone")),
     [node(A, zone="zone1", node=A), node(B, zon="zone1", node=B), node(X, zone="zone2", node=X),
      node(Y, zone="zone2", node=Y)], _pods(("a1", A, F), ("b1", B, F), ("x1", X, F), ("y1", Y, F)), {A}),
    ("pod cannot be scheduled as all nodes don't have label 'rack'", incoming(F, tsc(1, "rack")),
     [node(A, zone="zone1", node=A), node(X, zone="zone2", node=X)], [], set()),
    ("pods spread across nodes as 2/1/0/3, only node-x fits", incoming(F, tsc(1, "node")), four_nodes(),
     _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("y1", Y, F), ("y2", Y, F), ("y3", Y, F)), {X}),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit", incoming(F, tsc(2, "node")),
     four_nodes(), _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("y1", Y, F), ("y2", Y, F), ("y3", Y, F)),
     {B, X}),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself", incoming({"bar": ""}, tsc(1, "node")),
     four_nodes(), _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("y1", Y, F), ("y2", Y, F), ("y3", Y, F)),
     {B, X}),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits (filter only)",
     incoming(F, tsc(1, "node"), affinity_terms=[{"matchExpressions": [expr("node", "In", A, Y)]}]), four_nodes(),
     _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("y1", Y, F), ("y2", Y, F), ("y3", Y, F)), {A, B, X}),
    ("terminating Pods should be excluded", incoming(F, tsc(1, "node")), [node(A, node=A), node(B, node=B)],
     [pod("p-a", A, terminating=True, foo=""), pod("p-b", B, foo="")], {A}),
    ("incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits (filter only)",
     incoming(F, tsc(1, "zone"), affinity_terms=[{"matchExpressions": [expr("node", "NotIn", B)]}]), four_nodes(),
     _pods(("b1", B, F), ("b2", B, F), ("y1", Y, F)), {A, B}),
    ("nodes 2/2/1, maxSkew 2, fewer domains than minDomains, then the third node fits",
     incoming(F, tsc(2, "node", minDomains=4)), [node(n, node=n) for n in ("node-a", "node-b", "node-c")],
     _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("b2", B, F), ("c1", "node-c", F)), {"node-c"}),
    ("nodes 2/2/1, maxSkew 2, more domains than minDomains, then all nodes fit",
     incoming(F, tsc(2, "node", minDomains=2)), [node(n, node=n) for n in ("node-a", "node-b", "node-c")],
     _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("b2", B, F), ("c1", "node-c", F)), {A, B, "node-c"}),
    ("zones 2/1, maxSkew 2, fewer domains than minDomains, then the third and fourth nodes fit",
     incoming(F, tsc(2, "zone", minDomains=3)), four_nodes(), _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)),
     {X, Y}),
    ("zones 2/1, maxSkew 2, more domains than minDomains, then all nodes fit",
     incoming(F, tsc(2, "zone", minDomains=1)), four_nodes(), _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)),
     {A, B, X, Y}),
    ("NodeAffinityPolicy honored with labelSelectors",
     incoming(F, tsc(1, "node"), node_selector={"foo": ""}),
     [node(A, node=A, foo=""), node(B, node=B, foo=""), node(X, node=X, foo=""), node(Y, node=Y)],
     _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)), {X, Y}),
    ("NodeAffinityPolicy ignored with labelSelectors",
     incoming(F, tsc(1, "node", **IGNORE), node_selector={"foo": ""}),
     [node(A, node=A, foo=""), node(B, node=B, foo=""), node(X, node=X, foo=""), node(Y, node=Y)],
     _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)), {X}),
    ("NodeAffinityPolicy honored with nodeAffinity",
     incoming(F, tsc(1, "node"), affinity_terms=[{"matchExpressions": [expr("foo", "In", "")]}]),
     [node(A, node=A, foo=""), node(B, node=B, foo=""), node(X, node=X, foo=""), node(Y, node=Y)],
     _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)), {X, Y}),
    ("NodeAffinityPolicy ignored with nodeAffinity",
     incoming(F, tsc(1, "node", **IGNORE), affinity_terms=[{"matchExpressions": [expr("foo", "In", "")]}]),
     [node(A, node=A, foo=""), node(B, node=B, foo=""), node(X, node=X, foo=""), node(Y, node=Y)],
     _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)), {X}),
    ("NodeTaintsPolicy honored", incoming(F, tsc(1, "node", **HONOR)),
     [node(A, node=A, foo=""), node(B, node=B, foo=""), node(X, node=X, foo=""),
      node(Y, node=Y, taints=[UNSCHEDULABLE_TAINT])], _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)), {X, Y}),
    ("NodeTaintsPolicy ignored", incoming(F, tsc(1, "node")),
     [node(A, node=A, foo=""), node(B, node=B, foo=""), node(X, node=X, foo=""),
      node(Y, node=Y, taints=[UNSCHEDULABLE_TAINT])], _pods(("b1", A, F), ("b2", B, F), ("y1", Y, F)), {X}),
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]", incoming(F, tsc(1, "zone"), tsc(1, "node")),
     four_nodes(), _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("y1", Y, F), ("y2", Y, F), ("y3", Y, F)), {X}),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]", incoming(F, tsc(1, "zone"), tsc(1, "node")),
     four_nodes(), _pods(("a1", A, F), ("a2", A, F), ("b1", B, F), ("y1", Y, F), ("y2", Y, F), ("y3", Y, F),
                         ("y4", Y, F)), set()),
    ("Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
     incoming({"foo": "", "bar": ""}, tsc(1, "zone", FOO), tsc(1, "node", BAR)), four_nodes(),
     _pods(("a1", A, F), ("y1", Y, {"bar": ""})), {X}),
    ("Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
     incoming({"foo": "", "bar": ""}, tsc(1, "zone", FOO), tsc(1, "node", BAR)), four_nodes(),
     _pods(("a1", A, F), ("x1", X, {"bar": ""}), ("y1", Y, {"bar": ""})), set()),
    ("Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
     incoming({"foo": "", "bar": ""}, tsc(1, "zone", FOO), tsc(1, "node", BAR)), four_nodes(),
     _pods(("a1", A, F), ("a2", A, {"foo": "", "bar": ""}), ("y1", Y, F), ("y2", Y, {"foo": "", "bar": ""}),
           ("y3", Y, F)), {B}),
    ("Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
     incoming({"bar": ""}, tsc(1, "zone", FOO), tsc(1, "node", BAR)), four_nodes(),
     _pods(("a1", A, F), ("x1", X, {"bar": ""}), ("y1", Y, {"bar": ""})), {A, B}),
    ("two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
     incoming(F, tsc(1, "zone"), tsc(1, "node")),
     [node(A, zone="zone1", node=A), node(B, zone="zone1", node=B), node(X, zone="zone2"),
      node(Y, zone="zone2", node=Y)], _pods(("a1", A, F), ("y3", Y, F)), {B}),
    ("two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
     incoming(F, tsc(1, "zone"), tsc(1, "node", **IGNORE), node_selector={"foo": ""}),
     four_nodes(**{A: F, B: F, X: F}), _pods(("a1", A, F), ("b1", B, F), ("y1", Y, F)), {X}),
    ("two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
     incoming(F, tsc(1, "zone", **HONOR), tsc(1, "node")),
     [*four_nodes(**{A: F, B: F, X: F})[:3], node(Y, zone="zone2", node=Y, taints=[UNSCHEDULABLE_TAINT])],
     _pods(("a1", A, F), ("b1", B, F), ("y1", Y, F)), {X}),
    ("two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
     incoming(F, tsc(1, "zone"), tsc(1, "node"), node_selector={"foo": ""}),
     [node(A, zone="zone1", node=A, foo=""), node(B, zone="zone1", node=B), node(X, zone="zone2", node=X, foo=""),
      node(Y, zone="zone2", node=Y, foo="", taints=[UNSCHEDULABLE_TAINT])],
     _pods(("a1", A, F), ("b1", B, F), ("y1", Y, F)), {B, X}),
]


class TestFeasibleNodes:
    """feasible_nodes reproduces kube-scheduler's Filter verdicts."""

    @pytest.mark.parametrize(("name", "incoming_pod", "nodes", "pods", "expected"), KUBE_FILTER_CASES,
                             ids=[case[0] for case in KUBE_FILTER_CASES])
    def test_kube_scheduler_filter_table(self, name: str, incoming_pod: dict[str, Any], nodes: list[dict[str, Any]],
                                         pods: list[dict[str, Any]], expected: set[str]) -> None:
        """Each upstream Filter test row gives the same set of passing nodes, sorted."""
        assert feasible_nodes(incoming_pod, nodes, pods) == sorted(expected)

    def test_match_label_keys_leave_old_revision_out(self) -> None:
        """matchLabelKeys ANDs the pod's own pod-template-hash in, so the old ReplicaSet's pods stop counting."""
        selector = {"matchLabels": {"app": "web"}}
        labels = {"app": "web", "pod-template-hash": "v2"}
        old = [pod(f"old-{i}", A, app="web", **{"pod-template-hash": "v1"}) for i in range(3)]
        without = incoming(labels, tsc(1, "zone", selector))
        with_keys = incoming(labels, tsc(1, "zone", selector, matchLabelKeys=["pod-template-hash", "absent"]))
        assert feasible_nodes(without, four_nodes(), old) == [X, Y]
        assert feasible_nodes(with_keys, four_nodes(), old) == [A, B, X, Y]

    def test_empty_selector_counts_nothing_but_matches_itself(self) -> None:
        """A {} selector counts no pods (countPodsMatchSelector) yet selects the pod: skew is 1, maxSkew 1 passes."""
        crowded = [pod(f"a{i}", A, foo="") for i in range(5)]
        assert feasible_nodes(incoming(F, tsc(1, "zone", {})), four_nodes(), crowded) == [A, B, X, Y]

    def test_schedule_anyway_constraints_do_not_filter(self) -> None:
        """Only DoNotSchedule constraints filter; a pod with only soft ones passes every node."""
        crowded = [pod(f"a{i}", A, foo="") for i in range(5)]
        nodes = [*four_nodes(), node("no-labels")]
        assert feasible_nodes(incoming(F, tsc(1, "zone", when="ScheduleAnyway")), nodes, crowded) == sorted(
            [A, B, X, Y, "no-labels"])

    def test_unbound_and_unknown_node_pods_do_not_count(self) -> None:
        """Pods without spec.nodeName, or bound to a node not in the list, are not counted."""
        pods = [pod("pending", None, foo=""), pod("elsewhere", "node-z", foo=""), pod("y1", Y, foo="")]
        assert feasible_nodes(incoming(F, tsc(1, "zone")), four_nodes(), pods) == [A, B]

    def test_missing_namespace_is_default(self) -> None:
        """A pod without metadata.namespace is in 'default', so it counts against pods in 'default'."""
        pods = [pod("y1", Y, namespace="default", foo="")]
        assert feasible_nodes(incoming(F, tsc(1, "zone")), four_nodes(), pods) == [A, B]
        assert feasible_nodes(incoming(F, tsc(1, "zone"), namespace="other"), four_nodes(), pods) == [A, B, X, Y]

    @pytest.mark.parametrize(("constraint", "fragment"), [
        (tsc(0, "zone"), "maxSkew"),
        (tsc(1, "zone", when="Sometimes"), "Sometimes"),
        (tsc(1, "zone", when="ScheduleAnyway", minDomains=2), "minDomains"),
        (tsc(1, "zone", minDomains=0), "minDomains"),
        (tsc(1, ""), "topologyKey"),
        (tsc(1, "zone", nodeTaintsPolicy="Always"), "Always"),
        (tsc(1, "zone", {"matchExpressions": [expr("app", "Like", "x")]}), "Like"),
        (tsc(1, "zone", {"matchExpressions": [expr("app", "In")]}), "at least one value"),
        (tsc(1, "zone", {"matchExpressions": [expr("app", "Exists", "x")]}), "takes no values"),
    ])
    def test_invalid_constraints_are_refused(self, constraint: dict[str, Any], fragment: str) -> None:
        """What API validation rejects raises InvalidPlacementSpec naming the offending value."""
        with pytest.raises(errors.InvalidPlacementSpec, match=fragment):
            feasible_nodes(incoming(F, constraint), four_nodes(), [])

    def test_duplicate_constraint_refused(self) -> None:
        """Two DoNotSchedule constraints on one key are invalid, as in the API."""
        with pytest.raises(errors.InvalidPlacementSpec, match="duplicate"):
            feasible_nodes(incoming(F, tsc(1, "zone"), tsc(2, "zone")), four_nodes(), [])

    def test_duplicate_node_refused(self) -> None:
        """A node listed twice is refused rather than counted twice."""
        with pytest.raises(errors.InvalidPlacementSpec, match="node-a"):
            feasible_nodes(incoming(F, tsc(1, "zone")), [*four_nodes(), node(A, zone="zone1")], [])


THREE_ZONES = [node(f"{z}{i}", zone=f"zone-{z}", host=f"{z}{i}") for z in "abc" for i in (1, 2)]
WEB = {"matchLabels": {"app": "web"}}


class TestPlanSpread:
    """plan_spread places replicas one by one under the Filter, preferring the emptiest domains."""

    def test_zone_constraint_ties_by_node_name(self) -> None:
        """With only a zone constraint, zones rotate and each zone's first node by name is used."""
        plan = plan_spread(incoming({"app": "web"}, tsc(1, "zone", WEB)), 6, THREE_ZONES)
        assert plan == ["a1", "b1", "c1", "a1", "b1", "c1"]

    def test_soft_hostname_constraint_spreads_over_nodes(self) -> None:
        """A ScheduleAnyway hostname constraint adds the node's own count to the score."""
        pod_ = incoming({"app": "web"}, tsc(1, "zone", WEB), tsc(1, "host", WEB, when="ScheduleAnyway"))
        assert plan_spread(pod_, 6, THREE_ZONES) == ["a1", "b1", "c1", "a2", "b2", "c2"]

    def test_existing_pods_fill_the_emptiest_zone_first(self) -> None:
        """Existing matching pods make the plan start in the emptier zones."""
        pods = [pod("w1", "a1", app="web"), pod("w2", "a2", app="web"), pod("w3", "b1", app="web"),
                pod("other", "c1", app="db")]
        assert plan_spread(incoming({"app": "web"}, tsc(1, "zone", WEB)), 3, THREE_ZONES, pods) == ["c1", "b1", "c1"]

    def test_node_selector_and_taints_are_honoured(self) -> None:
        """Unlike feasible_nodes, the plan skips nodes the pod's nodeSelector or an untolerated taint excludes."""
        nodes = [node("a1", zone="zone-a", disk="ssd"), node("a2", zone="zone-a"),
                 node("b1", zone="zone-b", disk="ssd", taints=[{"key": "gpu", "value": "yes", "effect": "NoExecute"}]),
                 node("b2", zone="zone-b", disk="ssd")]
        pod_ = incoming({"app": "web"}, tsc(2, "zone", WEB), node_selector={"disk": "ssd"})
        assert plan_spread(pod_, 4, nodes) == ["a1", "b2", "a1", "b2"]
        pod_["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
        assert plan_spread(pod_, 2, nodes) == ["a1", "b1"]

    def test_required_affinity_is_honoured(self) -> None:
        """Required node affinity restricts the plan to the matching nodes."""
        pod_ = incoming({"app": "web"}, tsc(1, "zone", WEB),
                        affinity_terms=[{"matchExpressions": [expr("host", "NotIn", "a1", "b1")]}])
        assert plan_spread(pod_, 3, THREE_ZONES) == ["a2", "b2", "c1"]

    def test_tainted_empty_zone_pins_the_minimum(self) -> None:
        """An untolerated-but-counted tainted node keeps its zone at 0 (kubernetes#107464); Honor fixes it."""
        nodes = [*THREE_ZONES[:4], node("c1", zone="zone-c", taints=[UNSCHEDULABLE_TAINT])]
        stuck = incoming({"app": "web"}, tsc(1, "zone", WEB))
        with pytest.raises(errors.NotEnoughCandidates) as info:
            plan_spread(stuck, 4, nodes)
        assert info.value.chosen == ["a1", "b1"]
        assert info.value.required == 4
        assert "'zone-c'" in str(info.value) and "placed 2 of 4" in str(info.value)
        assert plan_spread(incoming({"app": "web"}, tsc(1, "zone", WEB, **HONOR)), 4, nodes) == ["a1", "b1", "a1", "b1"]

    def test_cordoned_node_is_skipped_but_its_zone_counts(self) -> None:
        """A cordoned node takes no replica (NodeUnschedulable) yet its zone stays a domain at 0, as the scheduler has it."""
        cordoned = node("c1", zone="zone-c")
        cordoned["spec"] = {"unschedulable": True}
        nodes = [*THREE_ZONES[:4], cordoned]
        with pytest.raises(errors.NotEnoughCandidates, match="held by 'zone-c'") as info:
            plan_spread(incoming({"app": "web"}, tsc(1, "zone", WEB)), 4, nodes)
        assert info.value.chosen == ["a1", "b1"]
        tolerant = incoming({"app": "web"}, tsc(1, "zone", WEB),
                            tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
        assert plan_spread(tolerant, 3, nodes) == ["a1", "b1", "c1"]
        with pytest.raises(errors.NotEnoughCandidates, match="1 are cordoned"):
            plan_spread(incoming({"app": "web"}, tsc(1, "zone", WEB)), 1, [cordoned])

    def test_min_domains_caps_each_zone(self) -> None:
        """With fewer zones than minDomains the minimum stays 0, so each zone takes at most maxSkew replicas."""
        pod_ = incoming({"app": "web"}, tsc(1, "zone", WEB, minDomains=4))
        with pytest.raises(errors.NotEnoughCandidates, match="minDomains") as info:
            plan_spread(pod_, 5, THREE_ZONES)
        assert info.value.chosen == ["a1", "b1", "c1"]

    def test_no_candidate_message_says_why(self) -> None:
        """When no node can run the pod at all, the message counts the nodes and the reasons."""
        nodes = [node("n1", zone="z1", taints=[UNSCHEDULABLE_TAINT]), node("n2"), node("n3", zone="z2")]
        pod_ = incoming({"app": "web"}, tsc(1, "zone", WEB), node_selector={"pool": "web"})
        with pytest.raises(errors.NotEnoughCandidates) as info:
            plan_spread(pod_, 1, nodes)
        message = str(info.value)
        assert info.value.chosen == [] and "lack a topology key" in message and "'n2'" in message
        assert "nodeSelector" in message and "taint" in message

    def test_pod_without_constraints_goes_to_first_node(self) -> None:
        """No constraints means every node scores 0: ties by name put all replicas on the first node."""
        assert plan_spread({"metadata": {"name": "solo"}, "spec": {}}, 3, THREE_ZONES) == ["a1", "a1", "a1"]

    def test_count_zero_and_negative(self) -> None:
        """Zero replicas plan to nothing; a negative count is refused."""
        pod_ = incoming({"app": "web"}, tsc(1, "zone", WEB))
        assert plan_spread(pod_, 0, THREE_ZONES) == []
        with pytest.raises(errors.InvalidPlacementSpec, match="-1"):
            plan_spread(pod_, -1, THREE_ZONES)

    def test_inputs_are_not_modified(self) -> None:
        """The pod, node and pod manifests are left exactly as they were."""
        pod_ = incoming({"app": "web"}, tsc(1, "zone", WEB), tsc(1, "host", WEB, when="ScheduleAnyway"))
        pods = [pod("w1", "a1", app="web")]
        before = copy.deepcopy((pod_, THREE_ZONES, pods))
        plan_spread(pod_, 7, THREE_ZONES, pods)
        assert (pod_, THREE_ZONES, pods) == before

    def test_large_cluster_matches_hand_count(self) -> None:
        """300 replicas over 90 nodes in 3 zones with a hostname limit: 100 per zone, 3 or 4 per node."""
        nodes = [node(f"n{i:03d}", zone=f"z{i % 3}", host=f"n{i:03d}") for i in range(90)]
        pod_ = incoming({"app": "web"}, tsc(1, "zone", WEB), tsc(1, "host", WEB))
        plan = plan_spread(pod_, 300, nodes)
        per_zone = {z: sum(1 for n in plan if int(n[1:]) % 3 == int(z[1])) for z in ("z0", "z1", "z2")}
        assert per_zone == {"z0": 100, "z1": 100, "z2": 100}
        assert {plan.count(n["metadata"]["name"]) for n in nodes} == {3, 4}
