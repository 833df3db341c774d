"""The placement core against the real kube-scheduler: PodTopologySpread's Filter and PV node affinity.

The shared control plane runs kube-scheduler with its default profile. Each scenario has nodes of its
own (label ``cz-scenario``, no providerID, so no labeller touches them), a namespace of its own, and
pods that require that label; nodeAffinityPolicy Ignore scenarios also use topology keys of their own,
since other tests' nodes would otherwise count as empty domains. Pods are created one at a time and
each is waited for (a watch) until bound or reported Unschedulable.

What is compared: (1) at every step, the scheduler's node is one the core's Filter admits
(``feasible_nodes`` plus nodeSelector, affinity, taints, cordons), and a pod stays Pending exactly
when the core admits no node; (2) the outcome (pods Pending, sorted counts per domain) of
``plan_spread`` equals the scheduler's whenever the Filter determines it. Which of several admitted
nodes the scheduler takes is decided by its scoring (resource balance, spread score, ties broken at
random), not by the Filter, so outcomes are compared only when every sequence of admitted choices
ends in the same one; the test enumerates those sequences to know.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from cloudzones import errors, labels
from cloudzones.placement import domains, feasible_nodes, plan_spread, selectors
from cloudzones.testing.controlplane import ControlPlane
from storageclass.topology import volume_topology

Z, H, FD = labels.ZONE, "kubernetes.io/hostname", labels.FAULT_DOMAIN
SCENARIO = "cz-scenario"
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@dataclasses.dataclass(frozen=True)
class Scenario:
    """Nodes (suffix → labels, taints, cordoned), the pod's spread stanza, how many copies, pods already bound."""

    id: str
    nodes: Mapping[str, Mapping[str, str]]
    constraints: Sequence[Mapping[str, Any]]
    count: int
    taints: Mapping[str, Sequence[Mapping[str, str]]] = dataclasses.field(default_factory=dict)
    cordoned: Sequence[str] = ()
    pod: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Extra pod spec (tolerations, nodeSelector entries, affinity) and ``labels``."""
    existing: Sequence[tuple[str, Mapping[str, str], bool]] = ()
    """(node suffix, labels, in another namespace)."""


def zones(*sizes: int, key: str = Z, names: Sequence[str] = ("eastus-1", "eastus-2", "eastus-3", "0", "1")
          ) -> dict[str, dict[str, str]]:
    """``sizes[i]`` nodes in zone ``names[i]``, suffixes ``z<i>n<j>``."""
    return {f"z{i}n{j}": {key: names[i]} for i, size in enumerate(sizes) for j in range(size)}


def spread(key: str = Z, skew: int = 1, *, hard: bool = True, **extra: Any) -> dict[str, Any]:
    """A constraint selecting the scenario's pods (``app: cz``)."""
    return {"topologyKey": key, "maxSkew": skew, "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "cz"}}, **extra}


def taint(key: str, effect: str = "NoSchedule") -> list[dict[str, str]]:
    """One taint ``key=yes:effect``."""
    return [{"key": key, "value": "yes", "effect": effect}]


OWN = "cz.test/zone"  # a scenario-specific key is made of it for nodeAffinityPolicy: Ignore
POOL_A = {**zones(1, 1, 1), "z0n0": {Z: "eastus-1", "pool": "a"}, "z1n0": {Z: "eastus-2", "pool": "a"}}
NOT_ZONE3 = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": Z, "operator": "NotIn", "values": ["eastus-3"]}]}]}}}}
MIXED = {"a": {Z: "eastus-1", FD: "0"}, "b": {Z: "eastus-2", FD: "0"}, "c": {Z: "0", FD: "0"}, "d": {Z: "1", FD: "1"},
         "e": {FD: "2"}, "f": {Z: "eastus-1", FD: "1"}}
OLD = ({"app": "cz", "rev": "old"},)
SCENARIOS = [
    Scenario("s01", zones(1, 1, 1), [spread()], 6),
    Scenario("s02", zones(2, 2, 2), [spread()], 7),
    Scenario("s03", zones(2, 2), [spread(skew=2)], 5),
    Scenario("s04", zones(1, 2, 3), [spread()], 6),
    Scenario("s05", zones(4), [spread(H)], 9),
    Scenario("s06", zones(1, 1, 1), [spread(H, 2)], 7),
    Scenario("s07", zones(1, 1), [spread(minDomains=3)], 4),
    Scenario("s08", zones(1, 1, 1), [spread(minDomains=3)], 4),
    Scenario("s09", zones(1, 1, 1), [spread(skew=2, minDomains=4)], 8),
    Scenario("s10", zones(1, 1, 2), [spread()], 4, taints={"z2n0": taint("t"), "z2n1": taint("t")}),
    Scenario("s11", zones(1, 1, 1), [spread(nodeTaintsPolicy="Honor")], 4, taints={"z2n0": taint("t")}),
    Scenario("s12", zones(1, 1, 1), [spread()], 6, taints={"z2n0": taint("t")},
             pod={"tolerations": [{"key": "t", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]}),
    Scenario("s13", zones(1, 1, 1), [spread()], 5, taints={"z2n0": taint("t", "PreferNoSchedule")}),
    Scenario("s14", zones(1, 2, 1), [spread()], 6, taints={"z1n0": taint("t", "NoExecute")}),
    Scenario("s15", POOL_A, [spread()], 4, pod={"nodeSelector": {"pool": "a"}}),
    Scenario("s16", {k: {OWN: v[Z], **{x: y for x, y in v.items() if x != Z}} for k, v in POOL_A.items()},
             [spread(OWN, nodeAffinityPolicy="Ignore")], 4, pod={"nodeSelector": {"pool": "a"}}),
    Scenario("s17", zones(1, 1, 1), [spread()], 5, pod=NOT_ZONE3),
    Scenario("s18", zones(1, 1, 1), [spread(matchLabelKeys=["rev"])], 3, pod={"labels": {"rev": "new"}},
             existing=[("z0n0", OLD[0], False), ("z0n0", OLD[0], False)]),
    Scenario("s19", zones(1, 1, 1), [spread()], 3, pod={"labels": {"rev": "new"}},
             existing=[("z0n0", OLD[0], False), ("z0n0", OLD[0], False)]),
    Scenario("s20", zones(1, 1, 1), [spread()], 4, existing=[("z1n0", {"app": "other"}, False)] * 3),
    Scenario("s21", zones(1, 1, 1), [spread()], 3, existing=[("z0n0", {"app": "cz"}, True)] * 3),
    Scenario("s22", zones(2, 2, 2), [spread(), spread(H)], 8),
    Scenario("s23", zones(1, 2, 3), [spread(), spread(H, 2)], 9),
    Scenario("s24", zones(1, 2, 2), [spread(), spread(H, hard=False)], 7),
    Scenario("s25", zones(1, 1, 0, 1, 1), [spread()], 6),
    Scenario("s26", MIXED, [spread()], 7),
    Scenario("s27", MIXED, [spread(FD)], 7),
    Scenario("s28", MIXED, [spread(), spread(FD)], 7),
    Scenario("s29", zones(1, 1, 1), [{**spread(), "labelSelector": {"matchLabels": {"app": "other"}}}], 5,
             existing=[("z0n0", {"app": "other"}, False)] * 2),
    Scenario("s30", zones(3), [spread()], 4),
    Scenario("s31", zones(1, 2, 1), [spread()], 6, cordoned=["z1n0"]),
    Scenario("s32", zones(1, 1, 1), [spread()], 4, cordoned=["z2n0"]),
    Scenario("s33", zones(1, 1, 1), [spread(H)], 4, pod={"nodeSelector": {Z: "eastus-2"}}),
    Scenario("s34", zones(1, 1, 1), [spread(minDomains=3, nodeTaintsPolicy="Honor")], 4, taints={"z2n0": taint("t")}),
    Scenario("s35", zones(2, 1, 1), [spread(skew=2, matchLabelKeys=["rev"])], 7, pod={"labels": {"rev": "b"}},
             existing=[("z1n0", {"app": "cz", "rev": "a"}, False)] * 2 + [("z0n0", {"app": "cz", "rev": "b"}, False)]),
    Scenario("s36", zones(1, 1, 1), [spread()], 6, taints={"z0n0": taint("t"), "z1n0": taint("u", "NoExecute")},
             pod={"tolerations": [{"operator": "Exists"}]}),
]


def node_name(scenario: Scenario, suffix: str) -> str:
    """Cluster-unique node names."""
    return f"cz-sched-{scenario.id}-{suffix}"


def node_manifests(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's Node manifests (hostname and scenario labels added; no providerID)."""
    result = []
    for suffix, extra in scenario.nodes.items():
        name = node_name(scenario, suffix)
        spec: dict[str, Any] = {"taints": [dict(t) for t in scenario.taints.get(suffix, ())]}
        if suffix in scenario.cordoned:
            spec["unschedulable"] = True
        result.append({"metadata": {"name": name, "labels": {H: name, SCENARIO: scenario.id, **extra}}, "spec": spec})
    return result


def template(scenario: Scenario, namespace: str) -> dict[str, Any]:
    """The pod every copy is made of."""
    extra = dict(scenario.pod)
    pod_labels = {"app": "cz", **extra.pop("labels", {})}
    selector = {SCENARIO: scenario.id, **extra.pop("nodeSelector", {})}
    constraints = [dict(c) for c in scenario.constraints]
    if any(c.get("nodeAffinityPolicy") == "Ignore" for c in constraints):
        for c in constraints:  # a key of this scenario's own: other tests' nodes must not be domains
            c["topologyKey"] = c["topologyKey"].replace(OWN, f"{OWN}-{scenario.id}")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "labels": pod_labels},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}], "nodeSelector": selector,
                     "topologySpreadConstraints": constraints, **extra}}


def renamed_own_key(scenario: Scenario, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes with the scenario-specific key in place of ``OWN``."""
    for node in nodes:
        node_labels = node["metadata"]["labels"]
        if OWN in node_labels:
            node_labels[f"{OWN}-{scenario.id}"] = node_labels.pop(OWN)
    return nodes


def settle(cp: ControlPlane, namespace: str, name: str, *, bound_only: bool = False) -> str | None:
    """Wait (watch) until the pod is bound (its node) or reported Unschedulable (None)."""
    def done(obj: dict[str, Any]) -> bool:
        if obj["metadata"]["name"] != name:
            return False
        if obj["spec"].get("nodeName"):
            return True
        conditions = (obj.get("status") or {}).get("conditions") or []
        return not bound_only and any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                                      and c.get("reason") == "Unschedulable" for c in conditions)
    found = cp.watch_until(f"/api/v1/namespaces/{namespace}/pods", done, timeout=60)
    assert found is not None, f"pod {namespace}/{name} neither bound nor reported Unschedulable within 60 s"
    return found["spec"].get("nodeName") or None


def pinned(body: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod required onto one node (by name, through the scheduler)."""
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}
    return body


@contextlib.contextmanager
def scenario_objects(cp: ControlPlane, namespaces: Sequence[str], nodes: list[dict[str, Any]]) -> Iterator[None]:
    """Namespaces and nodes that are removed afterwards (pods force-deleted: no kubelet would confirm)."""
    for namespace in namespaces:
        cp.ensure_namespace(namespace)
    cp.add_nodes(nodes)
    try:
        yield
    finally:
        for namespace in namespaces:
            cp.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", {"gracePeriodSeconds": 0})
            cp.request("DELETE", f"/api/v1/namespaces/{namespace}")
        for node in nodes:
            cp.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")


def admitted(pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> set[str]:
    """The core's Filter: spread (``feasible_nodes``) and the pod's nodeSelector, affinity, taints and cordons."""
    ok = {i.name for i in domains.node_infos(pod, nodes) if i.affinity_ok and i.taints_ok and i.schedulable}
    return ok & set(feasible_nodes(pod, nodes, pods))


def outcome(pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], placed: Sequence[str | None]
            ) -> tuple[int, tuple[tuple[int, ...], ...]]:
    """(pods Pending, per DoNotSchedule key the sorted new-pod counts over the domains of the nodes given)."""
    hard, _ = domains.parse_constraints(pod)
    by_node = {n["metadata"]["name"]: selectors.labels_of(n) for n in nodes}
    counts = []
    for constraint in hard:
        per_domain = {v[constraint.topology_key]: 0 for v in by_node.values() if constraint.topology_key in v}
        for name in placed:
            if name is not None:
                per_domain[by_node[name][constraint.topology_key]] += 1
        counts.append(tuple(sorted(per_domain.values())))
    return sum(1 for name in placed if name is None), tuple(counts)


def bound(pod: Mapping[str, Any], node: str, index: int) -> dict[str, Any]:
    """A copy of ``pod`` bound to ``node``."""
    return {**pod, "metadata": {**pod["metadata"], "name": f"p{index}"}, "spec": {**pod["spec"], "nodeName": node}}


def reachable(pod: Mapping[str, Any], count: int, nodes: Sequence[Mapping[str, Any]],
              existing: Sequence[Mapping[str, Any]]) -> set[tuple[int, tuple[tuple[int, ...], ...]]]:
    """Every outcome some sequence of Filter-admitted choices reaches (the scheduler's scoring picks one)."""
    names = [n["metadata"]["name"] for n in nodes]
    results: set[tuple[int, tuple[tuple[int, ...], ...]]] = set()
    seen: set[tuple[int, ...]] = set()
    stack = [tuple(0 for _ in names)]
    while stack:
        state = stack.pop()
        placed: list[str | None] = [name for name, k in zip(names, state, strict=True) for _ in range(k)]
        pods = [*existing, *(bound(pod, n, i) for i, n in enumerate(placed) if n is not None)]
        options = admitted(pod, nodes, pods) if len(placed) < count else set()
        if not options:
            results.add(outcome(pod, nodes, placed + [None] * (count - len(placed))))
        for name in options:
            following = tuple(k + (n == name) for n, k in zip(names, state, strict=True))
            if following not in seen:
                seen.add(following)
                stack.append(following)
    return results


def predicted(pod: Mapping[str, Any], count: int, nodes: Sequence[Mapping[str, Any]],
              existing: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """``plan_spread``'s nodes, None for each copy it cannot place."""
    try:
        chosen: list[str | None] = list(plan_spread(pod, count, nodes, existing))
    except errors.NotEnoughCandidates as exc:
        chosen = [str(n) for n in exc.chosen]
    return chosen + [None] * (count - len(chosen))


def run_scenario(cp: ControlPlane, scenario: Scenario) -> dict[str, Any]:
    """Schedule the scenario for real and compare; returns what was compared (for the agreement figure)."""
    namespace, other = f"cz-sched-{scenario.id}", f"cz-sched-{scenario.id}-other"
    nodes = renamed_own_key(scenario, node_manifests(scenario))
    pod = template(scenario, namespace)
    existing: list[dict[str, Any]] = []
    with scenario_objects(cp, [namespace, other], nodes):
        # A pod pinned to the last node, not tolerating not-ready: once bound, the scheduler has seen every
        # node in its final state (one node watch, in order), so no later pod meets a stale cache.
        sentinel = pinned({"metadata": {"name": "sentinel", "namespace": namespace}, "spec": {
            "containers": [{"name": "c", "image": "registry.invalid/pause:1"}],
            "tolerations": [{"key": t["key"], "operator": "Exists"} for ts in scenario.taints.values() for t in ts]
            + [{**UNSCHEDULABLE, "operator": "Exists"}]}}, nodes[-1]["metadata"]["name"])
        for index, (suffix, pod_labels, elsewhere) in enumerate(scenario.existing):
            target = node_name(scenario, suffix)
            body = pinned({"metadata": {"name": f"old{index}", "namespace": other if elsewhere else namespace,
                                        "labels": dict(pod_labels)},
                           "spec": {**sentinel["spec"], "affinity": None}}, target)
            cp.request("POST", f"/api/v1/namespaces/{body['metadata']['namespace']}/pods", body)
            assert settle(cp, body["metadata"]["namespace"], body["metadata"]["name"], bound_only=True) == target
            existing.append({**body, "spec": {**body["spec"], "nodeName": target}})
        cp.request("POST", f"/api/v1/namespaces/{namespace}/pods", sentinel)
        settle(cp, namespace, "sentinel", bound_only=True)
        existing.append({**sentinel, "spec": {**sentinel["spec"], "nodeName": nodes[-1]["metadata"]["name"]}})
        placed: list[str | None] = []
        for index in range(scenario.count):
            before = [*existing, *(bound(pod, n, i) for i, n in enumerate(placed) if n is not None)]
            allowed = admitted(pod, nodes, before)
            cp.request("POST", f"/api/v1/namespaces/{namespace}/pods",
                       {**pod, "metadata": {**pod["metadata"], "name": f"p{index}"}})
            got = settle(cp, namespace, f"p{index}")
            assert (got in allowed) if got else not allowed, (
                f"{scenario.id} pod p{index}: scheduler chose {got}, the core's Filter admits {sorted(allowed)}")
            placed.append(got)
    ends = reachable(pod, scenario.count, nodes, existing)
    plan = outcome(pod, nodes, predicted(pod, scenario.count, nodes, existing))
    real = outcome(pod, nodes, placed)
    return {"ends": ends, "plan": plan, "real": real}


class TestSpreadAgainstScheduler:
    """plan_spread and the core's Filter agree with kube-scheduler on every outcome the Filter determines."""

    @pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
    def test_scenario(self, control_plane: ControlPlane, scenario: Scenario) -> None:
        """Every step admitted by the core; Pending exactly when it admits nothing; determined outcomes equal."""
        result = run_scenario(control_plane, scenario)
        assert result["real"] in result["ends"] and result["plan"] in result["ends"]
        if len({end[0] for end in result["ends"]}) == 1:
            assert result["plan"][0] == result["real"][0], "pods left Pending differ"
        if len(result["ends"]) == 1:
            assert result["plan"] == result["real"], "sorted counts per domain differ"


R, BZ, BR, CSI = labels.REGION, labels.BETA_ZONE, labels.BETA_REGION, labels.CSI_DISK_ZONE
PV_NS = "cz-sched-pv"
PV_NODES = {
    "z1": {Z: "eastus-1", BZ: "eastus-1", R: "eastus", BR: "eastus", CSI: "eastus-1", FD: "0"},
    "z2": {Z: "eastus-2", BZ: "eastus-2", R: "eastus", BR: "eastus", CSI: "eastus-2", FD: "1"},
    **{f"fd{d}": {Z: d, BZ: d, R: "eastus", BR: "eastus", CSI: "", FD: d} for d in ("0", "1", "2", "36")},
    "fdonly": {R: "eastus", FD: "1", CSI: ""}, "bare": {R: "eastus"},
    "west": {Z: "westus-1", R: "westus", CSI: "westus-1", FD: "0"}}
"""AKS-like nodes: zoned, unzoned with fault domains as zones, a fault-domain label only, none, another region."""


def terms(*requirements: tuple[str, str, list[str]]) -> dict[str, Any]:
    """A one-term required node affinity."""
    expressions = [{"key": k, "operator": o, "values": v} for k, o, v in requirements]
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}


PV_FORMS = {  # form → ((PV labels, nodeAffinity), the nodes it is meant for)
    "zoned": (volume_topology("eastus-1", "eastus"), {"z1"}),
    "zoned-no-node": (volume_topology("eastus-3", "eastus"), set()),
    "unzoned": (volume_topology(None, "eastus"), {"fd0", "fd1", "fd2", "fd36", "fdonly"}),
    "unzoned-westus": (volume_topology(None, "westus"), set()),
    "zrs": (volume_topology(None, "eastus", zone_redundant=True), set(PV_NODES) - {"west"}),
    "csi-zoned": (({}, terms((CSI, "In", ["eastus-2"]))), {"z2"}),
    "csi-unzoned": (({}, terms((CSI, "In", [""]))), {"fd0", "fd1", "fd2", "fd36", "fdonly"}),
    "beta": (({BZ: "eastus-1", BR: "eastus"}, terms((BZ, "In", ["eastus-1"]), (BR, "In", ["eastus"]))), {"z1"}),
}


@pytest.fixture(scope="module")
def pv_nodes(control_plane: ControlPlane) -> Iterator[list[dict[str, Any]]]:
    """The PV scenario's nodes and namespace, the scheduler's cache known to hold them (a bound sentinel)."""
    scenario = Scenario("pv", PV_NODES, [], 0)
    nodes = node_manifests(scenario)
    with scenario_objects(control_plane, [PV_NS], nodes):
        last = nodes[-1]["metadata"]["name"]
        control_plane.request("POST", f"/api/v1/namespaces/{PV_NS}/pods", pinned(
            {"metadata": {"name": "sentinel"}, "spec": {"containers": [{"name": "c", "image": "x.invalid/p:1"}]}}, last))
        assert settle(control_plane, PV_NS, "sentinel", bound_only=True) == last
        try:
            yield nodes
        finally:
            for form in PV_FORMS:
                with contextlib.suppress(errors.KubeNotFound):
                    control_plane.request("DELETE", f"/api/v1/persistentvolumes/cz-sched-pv-{form}")


class TestVolumeAffinityAgainstScheduler:
    """Pods using a PV of each form we write land only where volume_node_affinity admits them."""

    @pytest.mark.parametrize("form", list(PV_FORMS))
    def test_form(self, control_plane: ControlPlane, pv_nodes: list[dict[str, Any]], form: str) -> None:
        """A real PV + bound claim; one pod pinned to each node and one free: bound iff the matcher admits."""
        (pv_labels, affinity), meant = PV_FORMS[form]
        matcher = selectors.volume_node_affinity(affinity)
        admits = {n["metadata"]["name"] for n in pv_nodes if matcher.matches(n["metadata"]["name"],
                                                                             n["metadata"]["labels"])}
        assert admits == {f"cz-sched-pv-{s}" for s in meant}
        # A statically bound claim (no provisioner): the PV controller completes the binding.
        control_plane.request("POST", "/api/v1/persistentvolumes", {
            "metadata": {"name": f"cz-sched-pv-{form}", "labels": pv_labels}, "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/tmp/cz"}, "nodeAffinity": affinity,
                "claimRef": {"namespace": PV_NS, "name": form}}})
        control_plane.request("POST", f"/api/v1/namespaces/{PV_NS}/persistentvolumeclaims", {
            "metadata": {"name": form}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                                 "resources": {"requests": {"storage": "1Gi"}},
                                                 "volumeName": f"cz-sched-pv-{form}"}})
        assert control_plane.watch_until(f"/api/v1/namespaces/{PV_NS}/persistentvolumeclaims", lambda c: (
            c["metadata"]["name"] == form and c.get("status", {}).get("phase") == "Bound")) is not None
        names = {f"{form}-{n['metadata']['name'].rsplit('-', 1)[1]}": n["metadata"]["name"] for n in pv_nodes}
        for pod_name, target in [*names.items(), (f"{form}-any", "")]:
            body = {"metadata": {"name": pod_name}, "spec": {
                "containers": [{"name": "c", "image": "x.invalid/p:1"}], "nodeSelector": {SCENARIO: "pv"},
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": form}}]}}
            control_plane.request("POST", f"/api/v1/namespaces/{PV_NS}/pods", pinned(body, target) if target else body)
        landed = {pod_name: settle(control_plane, PV_NS, pod_name) for pod_name in [*names, f"{form}-any"]}
        assert {names[p] for p, got in landed.items() if got and p in names} == admits
        free = landed[f"{form}-any"]
        assert (free in admits) if free else not admits
