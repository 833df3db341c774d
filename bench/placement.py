"""Benchmark: plan_spread against a per-replica full-scan planner implementing the same Filter and Score.

Scenario: 5,000 nodes in 3 zones (50 of them tainted control-plane nodes), 6,000 existing pods,
a pod with two DoNotSchedule constraints (zone maxSkew 1; hostname maxSkew 3 with
nodeTaintsPolicy Honor; with hostname maxSkew 1 this cluster deadlocks after 1,382 replicas, as
kube-scheduler would, both planners agree). The floor re-evaluates the Filter and the score on every node for
every replica (kube-scheduler's per-pod work, minus re-listing pods), written as tightly as plain
Python allows (`tight_scan_plan`: domains as list indices, counts in lists, everything inline); it
is timed on a prefix and its per-replica cost extrapolated, and its plan must equal plan_spread's on
that prefix. The old floor (`baseline_plan`, the library's helpers per node, ~13x slower) is printed
beside it for comparison only.

Goals: plan_spread >= 200x the tight scan at 100,000 replicas on 5,000 nodes; 2n/n <= 2.2.

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


def tight_scan_plan(pod: Mapping[str, Any], count: int, nodes: Sequence[Mapping[str, Any]],
                    pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """The fair floor: `baseline_plan`'s per-replica full scan (same Filter, score and tie-break, hence the
    same plan), written as tightly as plain Python allows: every node's domains turned into list
    indices once, counts in lists, the Filter and the score inline, no helper call per node."""
    hard, soft = domains.parse_constraints(pod)
    infos = domains.node_infos(pod, nodes)
    by_node = domains.pod_labels_by_node(pod, pods)
    constraints = [*hard, *soft]
    count_maps = domains.domain_counts(hard, infos, by_node) + domains.domain_counts(soft, infos, by_node)
    index = [{value: i for i, value in enumerate(m)} for m in count_maps]
    counts = [list(m.values()) for m in count_maps]
    nhard = len(hard)
    self_match = [1 if c.self_match else 0 for c in hard]
    max_skew = [c.max_skew for c in hard]
    rows = []  # (name, domain per constraint or -1, counted in the score?, penalty)
    for info in infos:
        if not (info.affinity_ok and info.taints_ok and all(c.topology_key in info.labels for c in hard)):
            continue
        has_soft = all(c.topology_key in info.labels for c in soft)
        slots = tuple(index[i].get(info.labels.get(c.topology_key, ""), -1) for i, c in enumerate(constraints))
        scored = tuple(i for i, c in enumerate(constraints) if c.hard or has_soft)
        adds = tuple(i for i, c in enumerate(constraints) if c.adds_self and (c.hard or has_soft))
        rows.append((info.name, slots, scored, adds, 0 if has_soft else planner.MISSING_KEY_PENALTY))
    chosen: list[str] = []
    for _ in range(count):
        minimums = []
        for i, c in enumerate(hard):
            values = counts[i]
            minimums.append(domains.NO_DOMAIN_MINIMUM if not values else 0 if len(values) < c.min_domains
                            else min(values))
        best_key: tuple[int, str] | None = None
        best_row = None
        for row in rows:
            name, slots, scored, _, score = row
            for i in range(nhard):
                if counts[i][slots[i]] + self_match[i] - minimums[i] > max_skew[i]:
                    break
            else:
                for i in scored:
                    score += counts[i][slots[i]]
                if best_key is None or score < best_key[0] or (score == best_key[0] and name < best_key[1]):
                    best_key, best_row = (score, name), row
        if best_row is None:
            break
        chosen.append(best_row[0])
        for i in best_row[3]:
            counts[i][best_row[1][i]] += 1
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
    slow_m, plan_m = timed(tight_scan_plan, pod, m, nodes, pods)
    if plan_m != plan_n[:m]:
        raise SystemExit("the tight full scan and plan_spread disagree: the floor is not doing the same work")
    generic_m, generic_plan = timed(baseline_plan, pod, min(m, 100), nodes, pods)
    if generic_plan != plan_n[:len(generic_plan)]:
        raise SystemExit("the generic full scan and plan_spread disagree")
    per_replica = slow_m / m
    slow_n = per_replica * n

    print(f"plan_spread  n={n:>7}: {fast_n:8.2f} s  ({fast_n / n * 1e6:6.1f} µs/replica)")
    print(f"plan_spread 2n={2 * n:>7}: {fast_2n:8.2f} s  ({fast_2n / (2 * n) * 1e6:6.1f} µs/replica)"
          f"  growth 2n/n = {fast_2n / fast_n:.2f}x (linear = 2.00x)")
    print(f"tight scan   m={m:>7}: {slow_m:8.2f} s  ({per_replica * 1e6:6.0f} µs/replica, measured; "
          f"same plan as plan_spread's first {m})")
    print(f"generic scan m={len(generic_plan):>7}: {generic_m:8.2f} s  ({generic_m / len(generic_plan) * 1e6:6.0f} "
          f"µs/replica: the old floor, through the library's helpers per node; "
          f"{generic_m / len(generic_plan) / per_replica:.1f}x the tight scan)")
    print(f"tight scan   n={n:>7}: {slow_n:8.1f} s  (extrapolated from the {m} measured replicas)")
    print(f"speed-up at n over the tight scan: {slow_n / fast_n:.0f}x (goal >= 200x); 2n/n "
          f"{fast_2n / fast_n:.2f} (goal <= 2.2)")
    if args.reference_nodes > 0:  # 0 skips the real kube-scheduler reference
        reference(args.reference_nodes, args.reference_pods, args.existing * args.reference_nodes // args.nodes)


if __name__ == "__main__":
    main()
