"""Benchmark: plan_spread against a per-replica full-scan planner implementing the same Filter and Score.

Scenario: 5,000 nodes in 3 zones (50 of them tainted control-plane nodes), 6,000 existing pods,
a pod with two DoNotSchedule constraints (zone maxSkew 1; hostname maxSkew 3 with
nodeTaintsPolicy Honor; with hostname maxSkew 1 this cluster deadlocks after 1,382 replicas, as
kube-scheduler would, both planners agree). The baseline re-evaluates the Filter and the score on every node for
every replica (kube-scheduler's per-pod work, minus re-listing pods); it is timed on a prefix and
its per-replica cost extrapolated, and its plan is checked to equal plan_spread's on that prefix.

Reference point, not a goal: the same scenario scaled down (``--reference-nodes``, existing pods in
proportion) on a real kube-scheduler (`cloudzones.testing.ControlPlane`), pods created 8 at a time
and timed until the last is bound, against plan_spread on the same nodes; pods placed per second for
both, and the sorted per-zone counts (which the zone constraint determines). Skipped, with a line
saying so, when no control-plane binaries are found.

Run:  PYTHONPATH=. python bench/placement.py [--replicas 100000] [--baseline-replicas 300]
          [--reference-nodes 300] [--reference-pods 600]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cloudzones.placement import domains, plan_spread, planner

ZONES = ("eastus-1", "eastus-2", "eastus-3")


def make_cluster(node_count: int, existing: int, seed: int = 7) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                                         list[dict[str, Any]]]:
    """The pod to spread, the node manifests and the existing pods."""
    rng = random.Random(seed)
    nodes = []
    for i in range(node_count):
        name = f"aks-pool-{i:05d}"
        node: dict[str, Any] = {"metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % len(ZONES)]}}}
        if i < 50:
            node["spec"] = {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}
        nodes.append(node)
    pods = [{"metadata": {"name": f"web-old-{i}", "namespace": "shop", "labels": {"app": "web"}},
             "spec": {"nodeName": nodes[rng.randrange(50, node_count)]["metadata"]["name"]}} for i in range(existing)]
    selector = {"matchLabels": {"app": "web"}}
    pod = {"metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}}, "spec": {
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector},
            {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector, "nodeTaintsPolicy": "Honor"}]}}
    return pod, nodes, pods


def baseline_plan(pod: Mapping[str, Any], count: int, nodes: Sequence[Mapping[str, Any]],
                  pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Straightforward planner: for each replica, scan every node with the Filter and the score."""
    hard, soft = domains.parse_constraints(pod)
    infos = domains.node_infos(pod, nodes)
    by_node = domains.pod_labels_by_node(pod, pods)
    constraints = [*hard, *soft]
    counts = domains.domain_counts(hard, infos, by_node) + domains.domain_counts(soft, infos, by_node)
    candidates = [i for i in infos if i.affinity_ok and i.taints_ok and all(c.topology_key in i.labels for c in hard)]
    chosen: list[str] = []
    for _ in range(count):
        minimums = [domains.global_minimum(c, counts[i]) for i, c in enumerate(hard)]
        best: tuple[int, str] | None = None
        best_info = None
        for info in candidates:
            if not domains.passes_filter(info, hard, counts[:len(hard)], minimums):
                continue
            has_soft = all(c.topology_key in info.labels for c in soft)
            score = 0 if has_soft else planner.MISSING_KEY_PENALTY
            for i, c in enumerate(constraints):
                if c.hard or has_soft:
                    score += counts[i][info.labels[c.topology_key]]
            if best is None or (score, info.name) < best:
                best, best_info = (score, info.name), info
        if best_info is None:
            break
        chosen.append(best_info.name)
        has_soft = all(c.topology_key in best_info.labels for c in soft)
        for i, c in enumerate(constraints):
            if c.adds_self and (c.hard or has_soft):
                counts[i][best_info.labels[c.topology_key]] += 1
    return chosen


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def reference(node_count: int, count: int, existing: int) -> None:
    """plan_spread against the real kube-scheduler on one cluster: pods placed per second."""
    from cloudzones.testing.controlplane import ControlPlane, find_binaries

    if find_binaries() is None:
        print("reference: skipped, no control-plane binaries (run scripts/control-plane build or set "
              "CLOUDZONES_CONTROL_PLANE)")
        return
    pod, nodes, pods = make_cluster(node_count, existing)
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}
    container = [{"name": "c", "image": "registry.invalid/pause:1"}]
    with ControlPlane(scheduler=True) as cp:
        cp.add_nodes(nodes)
        cp.ensure_namespace("shop")
        for old in pods:  # bound at creation, as the scheduler would have left them
            body = {**old, "spec": {**old["spec"], "containers": container}}
            cp.request("POST", "/api/v1/namespaces/shop/pods", body)
        # Bound only once the scheduler has seen the last node (its not-ready taint lifted) and every pod before it.
        last = nodes[-1]["metadata"]["name"]
        field = {"key": "metadata.name", "operator": "In", "values": [last]}
        pinned = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [field]}]}}
        cp.request("POST", "/api/v1/namespaces/shop/pods", {"metadata": {"name": "sentinel"}, "spec": {
            "containers": container, "affinity": {"nodeAffinity": pinned}}})
        if cp.watch_until("/api/v1/namespaces/shop/pods", lambda p: p["metadata"]["name"] == "sentinel"
                          and bool(p["spec"].get("nodeName"))) is None:
            raise SystemExit("reference: the scheduler did not bind the sentinel pod within 30 s")
        bound: dict[str, str] = {}

        def create(index: int) -> None:
            cp.request("POST", "/api/v1/namespaces/shop/pods", {
                "metadata": {"name": f"web-{index}", "labels": {"app": "web"}},
                "spec": {**pod["spec"], "containers": container}})

        def all_bound(obj: dict[str, Any]) -> bool:
            if obj["metadata"]["name"].startswith("web-") and obj["spec"].get("nodeName"):
                bound[obj["metadata"]["name"]] = obj["spec"]["nodeName"]
            return len(bound) == count

        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(count)))
        if cp.watch_until("/api/v1/namespaces/shop/pods", all_bound, timeout=600) is None:
            raise SystemExit(f"reference: only {len(bound)} of {count} pods were bound within 600 s")
        real = time.perf_counter() - started
    fast, plan = timed(plan_spread, pod, count, nodes, pods)
    old = [str(p["spec"]["nodeName"]) for p in pods]

    def zones(new: Sequence[str]) -> list[int]:
        # Matching pods per zone, old and new: what the zone constraint (maxSkew 1) determines.
        return sorted(Counter(zone_of[n] for n in [*old, *new]).values())

    print(f"reference: {node_count} nodes, {existing} existing pods, {count} new pods")
    print(f"  kube-scheduler: {real:8.2f} s  ({count / real:9.0f} pods/s, API round trips and the scheduler's "
          f"client rate limit included); pods per zone {zones(list(bound.values()))}")
    print(f"  plan_spread:    {fast:8.4f} s  ({count / fast:9.0f} pods/s); pods per zone {zones(plan)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--replicas", type=int, default=100_000)
    parser.add_argument("--baseline-replicas", type=int, default=300)
    parser.add_argument("--existing", type=int, default=6000)
    parser.add_argument("--reference-nodes", type=int, default=300)
    parser.add_argument("--reference-pods", type=int, default=600)
    args = parser.parse_args()
    pod, nodes, pods = make_cluster(args.nodes, args.existing)
    n = args.replicas
    print(f"scenario: {args.nodes} nodes in {len(ZONES)} zones, {args.existing} existing pods, "
          "constraints DoNotSchedule zone maxSkew 1 + hostname maxSkew 3")

    fast_n, plan_n = timed(plan_spread, pod, n, nodes, pods)
    fast_2n, _ = timed(plan_spread, pod, 2 * n, nodes, pods)
    m = args.baseline_replicas
    slow_m, plan_m = timed(baseline_plan, pod, m, nodes, pods)
    assert plan_m == plan_n[:m], "baseline and plan_spread disagree"
    per_replica = slow_m / m
    slow_n = per_replica * n

    print(f"plan_spread  n={n:>7}: {fast_n:8.2f} s  ({fast_n / n * 1e6:6.1f} µs/replica)")
    print(f"plan_spread 2n={2 * n:>7}: {fast_2n:8.2f} s  ({fast_2n / (2 * n) * 1e6:6.1f} µs/replica)"
          f"  growth 2n/n = {fast_2n / fast_n:.2f}x (linear = 2.00x)")
    print(f"full scan    m={m:>7}: {slow_m:8.2f} s  ({per_replica * 1e6:6.0f} µs/replica, measured; "
          f"same plan as plan_spread's first {m})")
    print(f"full scan    n={n:>7}: {slow_n:8.1f} s  (extrapolated from the {m} measured replicas)")
    print(f"speed-up at n: {slow_n / fast_n:.0f}x (goal >= 50x)")
    reference(args.reference_nodes, args.reference_pods, args.existing * args.reference_nodes // args.nodes)


if __name__ == "__main__":
    main()
