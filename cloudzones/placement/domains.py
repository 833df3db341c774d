"""Topology domains and pod counting the way kube-scheduler's PodTopologySpread PreFilter does it.

A node belongs to a constraint's domain ``node.labels[topologyKey]`` only when it carries every
topology key of its constraint group (all DoNotSchedule ones, or all ScheduleAnyway ones) and passes
the constraint's node inclusion policies; domains without pods still count (with 0). Pods count
when bound to a node (``spec.nodeName``), in the incoming pod's namespace, not terminating, and
selected by the constraint's selector (with ``matchLabelKeys`` merged in).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones import errors
from cloudzones.placement import selectors

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
_POLICIES = ("Honor", "Ignore")
#: kube-scheduler's critical path starts at MaxInt32, so with no eligible domain every skew passes.
NO_DOMAIN_MINIMUM = 2**31 - 1
#: What NodeUnschedulable checks a cordoned node's tolerations against.
_CORDON = {"spec": {"taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}}


@dataclasses.dataclass(frozen=True)
class SpreadConstraint:
    """One parsed entry of ``spec.topologySpreadConstraints``."""

    topology_key: str
    max_skew: int
    hard: bool
    """True for ``whenUnsatisfiable: DoNotSchedule``."""
    selector: selectors.LabelSelector
    """The labelSelector with the pod's ``matchLabelKeys`` values ANDed in."""
    min_domains: int = 1
    honor_affinity: bool = True
    """``nodeAffinityPolicy: Honor`` (the default): nodes failing the pod's node affinity are left out."""
    honor_taints: bool = False
    """``nodeTaintsPolicy: Honor``: nodes with untolerated taints are left out (default Ignore)."""
    self_match: bool = True
    """Whether the selector selects the incoming pod itself (adds 1 to the skew of its node's domain)."""

    @property
    def counts_pods(self) -> bool:
        """Whether matching pods are counted at all (an empty ``{}`` selector counts none)."""
        return not self.selector.empty and not self.selector.nothing

    @property
    def adds_self(self) -> bool:
        """Whether placing a copy of the pod raises its domain's count."""
        return self.self_match and self.counts_pods

    def describe(self) -> str:
        """``topologyKey=zone maxSkew=1`` plus minDomains when set, for messages."""
        extra = f" minDomains={self.min_domains}" if self.min_domains != 1 else ""
        return f"topologyKey={self.topology_key!r} maxSkew={self.max_skew}{extra}"


def parse_constraints(pod: Mapping[str, Any]) -> tuple[list[SpreadConstraint], list[SpreadConstraint]]:
    """The pod's (DoNotSchedule, ScheduleAnyway) constraints; `InvalidPlacementSpec` for what the API rejects."""
    pod_labels = selectors.labels_of(pod)
    raw = (pod.get("spec") or {}).get("topologySpreadConstraints") or []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise errors.InvalidPlacementSpec(f"spec.topologySpreadConstraints must be a list, got {raw!r}")
    hard: list[SpreadConstraint] = []
    soft: list[SpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(raw):
        where = f"spec.topologySpreadConstraints[{index}]"
        constraint = _parse_constraint(item, where, pod_labels)
        when = DO_NOT_SCHEDULE if constraint.hard else SCHEDULE_ANYWAY
        if (constraint.topology_key, when) in seen:
            raise errors.InvalidPlacementSpec(
                f"{where}: duplicate constraint for topologyKey {constraint.topology_key!r} "
                f"and whenUnsatisfiable {when}")
        seen.add((constraint.topology_key, when))
        (hard if constraint.hard else soft).append(constraint)
    return hard, soft


def _parse_constraint(item: Any, where: str, pod_labels: Mapping[str, str]) -> SpreadConstraint:
    if not isinstance(item, Mapping):
        raise errors.InvalidPlacementSpec(f"{where} must be a mapping, got {item!r}")
    key = item.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise errors.InvalidPlacementSpec(f"{where}.topologyKey must be a non-empty string, got {key!r}")
    max_skew = _positive_int(item.get("maxSkew"), f"{where}.maxSkew")
    when = item.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise errors.InvalidPlacementSpec(
            f"{where}.whenUnsatisfiable must be {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}, got {when!r}")
    min_domains = 1
    if item.get("minDomains") is not None:
        min_domains = _positive_int(item.get("minDomains"), f"{where}.minDomains")
        if when != DO_NOT_SCHEDULE:
            raise errors.InvalidPlacementSpec(
                f"{where}.minDomains can only be used with whenUnsatisfiable=DoNotSchedule, not {when}")
    affinity_policy = item.get("nodeAffinityPolicy") or "Honor"
    taints_policy = item.get("nodeTaintsPolicy") or "Ignore"
    for name, policy in (("nodeAffinityPolicy", affinity_policy), ("nodeTaintsPolicy", taints_policy)):
        if policy not in _POLICIES:
            raise errors.InvalidPlacementSpec(f"{where}.{name} must be Honor or Ignore, got {policy!r}")
    selector = selectors.parse_label_selector(item.get("labelSelector"), where=f"{where}.labelSelector")
    match_label_keys = item.get("matchLabelKeys") or []
    if isinstance(match_label_keys, str) or not isinstance(match_label_keys, Sequence):
        raise errors.InvalidPlacementSpec(f"{where}.matchLabelKeys must be a list, got {match_label_keys!r}")
    # Keys the pod does not carry are ignored (KEP-3243), the rest become key=value requirements.
    selector = selector.with_labels({k: pod_labels[k] for k in match_label_keys if k in pod_labels})
    return SpreadConstraint(
        topology_key=key, max_skew=max_skew, hard=when == DO_NOT_SCHEDULE, selector=selector,
        min_domains=min_domains, honor_affinity=affinity_policy == "Honor", honor_taints=taints_policy == "Honor",
        self_match=selector.matches(pod_labels))


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidPlacementSpec(f"{where} must be a positive integer, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """What spreading needs from one node manifest, evaluated once against the incoming pod."""

    name: str
    labels: Mapping[str, str]
    affinity_ok: bool
    """Passes the pod's nodeSelector and required node affinity."""
    taints_ok: bool
    """Has no NoSchedule/NoExecute taint the pod does not tolerate."""
    schedulable: bool = True
    """Not cordoned (``spec.unschedulable``), or the pod tolerates ``node.kubernetes.io/unschedulable``
    (kube-scheduler's NodeUnschedulable filter; a cordon alone does not change spread domains)."""

    def eligible(self, constraint: SpreadConstraint, group: Sequence[SpreadConstraint]) -> bool:
        """Whether this node's domain for ``constraint`` is counted (keys of the whole group, policies)."""
        if any(c.topology_key not in self.labels for c in group):
            return False
        if constraint.honor_affinity and not self.affinity_ok:
            return False
        return not (constraint.honor_taints and not self.taints_ok)


def node_infos(pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> list[NodeInfo]:
    """One `NodeInfo` per node manifest, in input order; `InvalidPlacementSpec` for a nameless or repeated node."""
    affinity = selectors.required_node_affinity(pod)
    tolerations = selectors.pod_tolerations(pod)
    infos: list[NodeInfo] = []
    seen: set[str] = set()
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise errors.InvalidPlacementSpec(f"every node needs metadata.name, got {name!r}")
        if name in seen:
            raise errors.InvalidPlacementSpec(f"node {name!r} is listed twice")
        seen.add(name)
        labels = selectors.labels_of(node)
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        infos.append(NodeInfo(name, labels, affinity.matches(name, labels),
                              not selectors.has_untolerated_taint(node, tolerations),
                              not cordoned or not selectors.has_untolerated_taint(_CORDON, tolerations)))
    return infos


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace``, ``default`` when absent."""
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def pod_labels_by_node(pod: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, str]]]:
    """Labels of the existing pods that can count for ``pod``: bound, same namespace, not terminating."""
    namespace = namespace_of(pod)
    by_node: dict[str, list[dict[str, str]]] = defaultdict(list)
    for other in pods:
        node_name = (other.get("spec") or {}).get("nodeName")
        if not node_name or namespace_of(other) != namespace:
            continue
        if (other.get("metadata") or {}).get("deletionTimestamp") is not None:
            continue  # terminating pods are bypassed (kubernetes/kubernetes#87621)
        by_node[str(node_name)].append(selectors.labels_of(other))
    return by_node


def domain_counts(constraints: Sequence[SpreadConstraint], infos: Sequence[NodeInfo],
                  pods_by_node: Mapping[str, list[dict[str, str]]]) -> list[dict[str, int]]:
    """Per constraint, matching pods per eligible domain (every eligible domain present, maybe with 0)."""
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for info in infos:
        on_node = pods_by_node.get(info.name, ())
        for index, constraint in enumerate(constraints):
            if not info.eligible(constraint, constraints):
                continue
            value = info.labels[constraint.topology_key]
            matching = 0
            if constraint.counts_pods:
                matching = sum(1 for labels in on_node if constraint.selector.matches(labels))
            counts[index][value] = counts[index].get(value, 0) + matching
    return counts


def global_minimum(constraint: SpreadConstraint, counts: Mapping[str, int]) -> int:
    """The skew baseline: the smallest count over eligible domains, 0 below ``minDomains``."""
    if not counts:
        return NO_DOMAIN_MINIMUM
    if len(counts) < constraint.min_domains:
        return 0
    return min(counts.values())


def passes_filter(
    info: NodeInfo, hard: Sequence[SpreadConstraint], counts: Sequence[Mapping[str, int]], minimums: Sequence[int],
) -> bool:
    """kube-scheduler's Filter: every constraint's key present and ``count + selfMatch − min ≤ maxSkew``."""
    for constraint, domain_count, minimum in zip(hard, counts, minimums, strict=True):
        value = info.labels.get(constraint.topology_key)
        if value is None:
            return False
        skew = domain_count.get(value, 0) + (1 if constraint.self_match else 0) - minimum
        if skew > constraint.max_skew:
            return False
    return True
