"""PodTopologySpread for plans: which nodes pass kube-scheduler's Filter, and where N replicas would go.

``feasible_nodes`` is exactly the Filter for DoNotSchedule constraints. ``plan_spread`` places
replicas one after another under the same rule, as if each had been scheduled before the next,
also honouring the pod's nodeSelector, required node affinity, taints and cordons, and preferring the
node whose domains hold the fewest matching pods (over all the pod's constraints, DoNotSchedule
and ScheduleAnyway alike, unweighted), then the node name. With only a zone constraint every
replica of a zone lands on that zone's first node by name; add a hostname constraint (either
kind) to spread over nodes too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones import errors
from cloudzones.placement import domains, planner


def feasible_nodes(pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]],
                   pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Sorted names of the nodes passing the PodTopologySpread Filter for ``pod`` (DoNotSchedule only).

    Only this filter: a node the pod's nodeSelector or a taint would exclude is still returned
    when it passes the spread rule. A pod without DoNotSchedule constraints passes everywhere.
    """
    hard, _ = domains.parse_constraints(pod)
    infos = domains.node_infos(pod, nodes)
    if not hard:
        return sorted(info.name for info in infos)
    counts = domains.domain_counts(hard, infos, domains.pod_labels_by_node(pod, pods))
    minimums = [domains.global_minimum(c, n) for c, n in zip(hard, counts, strict=True)]
    return sorted(info.name for info in infos if domains.passes_filter(info, hard, counts, minimums))


def plan_spread(pod: Mapping[str, Any], count: int, nodes: Sequence[Mapping[str, Any]],
                pods: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """Node names for ``count`` new replicas of ``pod``, each feasible once the previous ones are placed.

    Raises `NotEnoughCandidates` (``.chosen``: the names placed so far) when a replica fits
    nowhere, and `InvalidPlacementSpec` for a negative count or a malformed constraint.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise errors.InvalidPlacementSpec(f"count must be a non-negative integer, got {count!r}")
    hard, soft = domains.parse_constraints(pod)
    infos = domains.node_infos(pod, nodes)
    by_node = domains.pod_labels_by_node(pod, pods)
    constraints = [*hard, *soft]
    counts = domains.domain_counts(hard, infos, by_node) + domains.domain_counts(soft, infos, by_node)
    candidates = [info for info in infos
                  if info.affinity_ok and info.taints_ok and info.schedulable
                  and all(c.topology_key in info.labels for c in hard)]
    if count == 0:
        return []
    ids = [{value: i for i, value in enumerate(sorted(domain_count))} for domain_count in counts]
    slots = []
    for info in candidates:
        has_soft_keys = all(c.topology_key in info.labels for c in soft)
        slots.append(tuple(
            ids[i][info.labels[c.topology_key]] if c.hard or has_soft_keys else -1
            for i, c in enumerate(constraints)))
    specs = [planner.ConstraintSpec(hard=c.hard, max_skew=c.max_skew, self_match=int(c.self_match),
                                    increment=int(c.adds_self), min_domains=c.min_domains) for c in constraints]
    engine = planner.Planner(specs, [[n[v] for v in sorted(n)] for n in counts],
                             [info.name for info in candidates], slots)
    chosen = engine.run(count)
    if len(chosen) < count:
        reason = _why_stuck(engine, hard, ids, infos, candidates)
        raise errors.NotEnoughCandidates(f"placed {len(chosen)} of {count} replicas of pod {_pod_name(pod)}: {reason}",
                                         chosen=chosen, required=count)
    return chosen


def _pod_name(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    name = metadata.get("name") or metadata.get("generateName") or "<unnamed>"
    return f"{domains.namespace_of(pod)}/{name}"


def _why_stuck(engine: planner.Planner, hard: Sequence[domains.SpreadConstraint], ids: Sequence[Mapping[str, int]],
               infos: Sequence[domains.NodeInfo], candidates: Sequence[domains.NodeInfo]) -> str:
    """Plain words for why no node can take the next replica."""
    if not candidates:
        missing = [i.name for i in infos if any(c.topology_key not in i.labels for c in hard)]
        unaffine = [i.name for i in infos if not i.affinity_ok]
        tainted = [i.name for i in infos if not i.taints_ok]
        cordoned = [i.name for i in infos if not i.schedulable]
        parts = [f"{len(infos)} node(s) given"]
        if missing:
            keys = sorted({c.topology_key for c in hard})
            parts.append(f"{len(missing)} lack a topology key of {keys} ({_some(missing)})")
        if unaffine:
            parts.append(f"{len(unaffine)} fail the pod's nodeSelector/required node affinity ({_some(unaffine)})")
        if tainted:
            parts.append(f"{len(tainted)} have an untolerated NoSchedule/NoExecute taint ({_some(tainted)})")
        if cordoned:
            parts.append(f"{len(cordoned)} are cordoned ({_some(cordoned)})")
        return "no node can run the pod at all: " + "; ".join(parts)
    parts = []
    for index, constraint in enumerate(hard):
        key = constraint.topology_key
        admitted = [i for i in candidates if engine.admits(index, ids[index][i.labels[key]])]
        part = (f"{constraint.describe()} (global minimum {engine.effective_minimum(index)}) admits "
                f"{len(admitted)} of {len(candidates)} schedulable node(s)")
        admitted_domains = sorted({i.labels[key] for i in admitted})
        if 0 < len(admitted_domains) <= 5:
            part += f" in {_some(admitted_domains)}"
        counts = engine.counts[index]
        if len(counts) < constraint.min_domains:
            part += f"; only {len(counts)} eligible domain(s), fewer than minDomains, so the minimum stays 0"
        else:
            reachable = {i.labels[key] for i in candidates}
            stuck = sorted(v for v, d in ids[index].items()
                           if counts[d] == engine.effective_minimum(index) and v not in reachable)
            if stuck:
                part += (f"; the minimum is held by {_some(stuck)}, where no node can take the pod "
                         f"(taint, affinity or a missing key)")
        parts.append(part)
    ending = "; and no node is admitted by all of them" if len(hard) > 1 else ""
    return "no node passes the topology spread constraints any more: " + "; ".join(parts) + ending


def _some(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
