"""Who keeps quorum when a zone is lost: pods grouped into workloads, counted against the desired membership (pure).

Part of the outage what-if (`cloudzones.workloads.outage`), which documents the rules.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from cloudzones import placement, quantity, shapes
from cloudzones.workloads import _manifests as m
from cloudzones.workloads import findings as f

REPLICATION_FACTOR_ANNOTATION = "cloudzones.io/replication-factor"
FDB_CLUSTER_LABEL = "foundationdb.org/fdb-cluster-name"
_GROUP_LABELS = ("app.kubernetes.io/instance", "app.kubernetes.io/name", "app.kubernetes.io/component")


class Coordinators(Protocol):
    """What a workload row needs from one FDB cluster's coordinator verdict."""

    @property
    def coordinators(self) -> tuple[str, ...]: ...

    @property
    def lost(self) -> tuple[str, ...]: ...

    @property
    def quorum(self) -> int: ...

    @property
    def survives(self) -> bool: ...


@dataclasses.dataclass(frozen=True)
class WorkloadImpact:
    """A workload with pods in the lost zone."""

    workload: str
    """``Kind/namespace/name`` of the owner, or ``label:namespace/value`` for a label group."""
    pods: int
    """The desired members (a StatefulSet's ``spec.replicas``), else the pods seen."""
    lost: tuple[str, ...]
    replication_factor: int | None
    """From the annotation; None for a member quorum."""
    quorum: int
    survivors: int
    """Pods left, or for a zone-aware store the replicas each affected key keeps."""
    status: str
    """``quorum-lost`` (error), ``unavailable`` (stateless, every replica lost) or ``degraded`` (keeps serving)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({"workload": self.workload, "pods": self.pods, "lost": self.lost,
                            "replicationFactor": self.replication_factor, "quorum": self.quorum,
                            "survivors": self.survivors, "status": self.status})


@dataclasses.dataclass(frozen=True)
class Context:
    """The lost zone's nodes and what the snapshot says beyond the pods."""

    lost_nodes: set[str]
    zone_of: Mapping[str, str]
    not_ready: set[str]
    desired: Mapping[str, int]
    """``StatefulSet/ns/name`` → ``spec.replicas``."""
    coordinators: Mapping[str, Coordinators]
    place: str = "zone"
    """What is lost, in words: ``zone``, or ``fault domain`` for an unzoned VM's (never called a zone)."""

    def up(self, pod: Mapping[str, Any]) -> bool:
        """Bound, Running and on a Ready node: a member that serves now."""
        return (running(pod) and (pod.get("status") or {}).get("phase") not in ("Pending", "Unknown")
                and node_of(pod) not in self.not_ready)


def node_ready(node: Mapping[str, Any]) -> bool:
    """False only when the node reports Ready other than True (a manifest without conditions is ready)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return str(condition.get("status")) == "True"
    return True


def desired_replicas(statefulsets: Sequence[Any]) -> dict[str, int]:
    m.shaped(list(statefulsets), shapes.ListOf(shapes.MapOf(shapes.ANY)), "statefulSets")
    result = {}
    for sts in statefulsets:
        spec = m.mapping(sts.get("spec"), "spec", m.name_of(sts))
        key = f"StatefulSet/{m.namespace_of(sts)}/{m.name_of(sts)}"
        # The API server defaults spec.replicas to 1.
        result[key] = m.positive_int(spec.get("replicas", 1), "spec.replicas", key, minimum=0)
    return result


def running(pod: Mapping[str, Any]) -> bool:
    if not node_of(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def pod_id(pod: Mapping[str, Any]) -> str:
    return f"{m.namespace_of(pod)}/{m.name_of(pod)}"


def group_of(pod: Mapping[str, Any]) -> str | None:
    """The workload a pod belongs to (``Kind/namespace/name`` of its controller, or a label group); None for
    DaemonSet pods."""
    return _group(pod)


def _group(pod: Mapping[str, Any]) -> str | None:
    """The workload a pod belongs to; None for DaemonSet pods."""
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("controller"):
            if owner.get("kind") == "DaemonSet":
                return None
            return f"{owner.get('kind')}/{m.namespace_of(pod)}/{owner.get('name')}"
    pod_labels = m.labels_of(pod)
    if pod_labels.get(FDB_CLUSTER_LABEL):
        return f"FoundationDBCluster/{m.namespace_of(pod)}/{pod_labels[FDB_CLUSTER_LABEL]}"
    values = [pod_labels[k] for k in _GROUP_LABELS if pod_labels.get(k)]
    if values:
        return f"label:{m.namespace_of(pod)}/{'/'.join(values)}"
    if pod_labels.get("app"):
        return f"label:{m.namespace_of(pod)}/{pod_labels['app']}"
    return f"Pod/{pod_id(pod)}"


def group_pods(every_pod: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The pods that count as members (not finished, not being deleted), by workload (`group_of`)."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in every_pod:
        if (pod.get("metadata") or {}).get("deletionTimestamp") or \
                (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        key = _group(pod)
        if key is not None:
            groups[key].append(pod)
    return groups


def workloads(every_pod: Sequence[Mapping[str, Any]], context: Context, found: list[f.Finding], *,
              groups: Mapping[str, list[Mapping[str, Any]]] | None = None) -> list[WorkloadImpact]:
    """The impact on every workload with a member in the lost zone; ``groups``: `group_pods` of ``every_pod``."""
    if groups is None:
        groups = group_pods(every_pod)
    impacts = []
    for key in sorted(groups):
        members = groups[key]
        lost = sorted(pod_id(p) for p in members if running(p) and node_of(p) in context.lost_nodes)
        if not lost:
            continue
        desired = _desired(key, members, context)
        up = [p for p in members if context.up(p)]
        left = sum(1 for p in up if node_of(p) not in context.lost_nodes)
        down = f" ({desired - len(up)} already down)" if desired > len(up) else ""
        rf = _replication_factor(members, key, found)
        coordinators = context.coordinators.get(key.removeprefix("FoundationDBCluster/"))
        if rf is not None:
            survivors, quorum, what = _zone_aware(rf, members, up, desired, context)
            ok = survivors >= quorum
        elif key.startswith("FoundationDBCluster/") and coordinators is not None:
            # The database serves while its coordinators keep a majority: the coordinators section's verdict.
            quorum, ok = coordinators.quorum, coordinators.survives
            survivors = len(coordinators.coordinators) - len(coordinators.lost)
            what = (f"FoundationDB keeps {survivors} of {len(coordinators.coordinators)} coordinator(s), a "
                    f"majority needs {quorum}; {left} of {desired} process pod(s) left{down}")
        elif key.startswith("StatefulSet/"):
            survivors, quorum = left, desired // 2 + 1
            ok = survivors >= quorum
            what = f"{survivors} of {desired} member(s) left{down}, a majority needs {quorum}"
        else:
            # Stateless replicas: no quorum, any survivor serves (the lost ones are recreated elsewhere).
            survivors, quorum = left, 1
            ok = survivors >= 1
            what = f"{survivors} of {desired} replica(s) left{down}"
        status = "degraded" if ok else ("quorum-lost" if quorum > 1 else "unavailable")
        impacts.append(WorkloadImpact(key, desired, tuple(lost), rf, quorum, survivors, status))
        if coordinators is not None and rf is None and key.startswith("FoundationDBCluster/"):
            if ok:  # a lost majority is the coordinators section's error; one error per cause
                found.append(f.info("degraded", f"keeps its coordinator majority: {what}", key))
        elif status == "quorum-lost":
            found.append(f.error("quorum-lost", f"loses quorum: {what}", key))
        elif status == "unavailable":
            found.append(f.warning("unavailable", f"every replica ({m.some(lost)}) is in the lost {context.place} or "
                                   "already down; it is down until they are recreated elsewhere", key))
        else:
            found.append(f.info("degraded", f"{'keeps quorum' if quorum > 1 else 'still serving'}: {what}", key))
    return impacts


def _desired(key: str, members: Sequence[Mapping[str, Any]], context: Context) -> int:
    """A StatefulSet's ``spec.replicas`` when the snapshot has it, else the pods seen and their ordinals."""
    if key in context.desired:
        return context.desired[key]
    count = len(members)
    if key.startswith("StatefulSet/"):
        owner = key.rsplit("/", 1)[1]
        for pod in members:
            suffix = m.name_of(pod).removeprefix(owner + "-")
            if suffix.isascii() and suffix.isdigit() and len(suffix) < 7:
                count = max(count, int(suffix) + 1)  # a missing lower ordinal is a member that is gone
    return count


def _zone_aware(rf: int, members: Sequence[Mapping[str, Any]], up: Sequence[Mapping[str, Any]], desired: int,
                context: Context) -> tuple[int, int, str]:
    """(replicas a key keeps at worst, write quorum, words) for a zone-aware store losing the zone."""
    per_zone = Counter(context.zone_of.get(node_of(p), "") for p in up)
    spanned = set(per_zone) | {context.zone_of.get(node_of(p), "") for p in members if node_of(p)}
    lost_zones = {context.zone_of.get(n, "") for n in context.lost_nodes}
    holding = min(len(spanned), rf)
    # At worst each other zone with a down member (or a member with no node at all) holds one of the
    # key's replicas on that member: it is as lost as the zone.
    impaired = {context.zone_of.get(node_of(p), "") for p in members if node_of(p) and not context.up(p)}
    unplaced = max(0, desired - sum(1 for p in members if node_of(p)))
    others = holding - (1 if spanned & lost_zones else 0)
    survivors = max(0, others - min(others, len(impaired - lost_zones) + unplaced))
    tolerance = placement.failure_report(per_zone, rf) if per_zone else None
    needed = rf // 2 + 1
    reads = tolerance is not None and tolerance.read_zone_failures >= 1
    down = desired - len(up)
    what = (f"zone-aware store, replication factor {rf} over {len(spanned)} zone(s): a key keeps {survivors} of "
            f"{rf} replica(s){f' at worst ({down} member(s) already down)' if down > 0 else ''}, writes need "
            f"{needed}; reads {'survive' if reads else 'fail too'}")
    return survivors, needed, what


def _replication_factor(members: Sequence[Mapping[str, Any]], key: str, found: list[f.Finding]) -> int | None:
    values = {m.annotations_of(p).get(REPLICATION_FACTOR_ANNOTATION) for p in members} - {None}
    if not values:
        return None
    if len(values) > 1:
        found.append(f.warning("replication-factor-mixed", f"pods disagree on {REPLICATION_FACTOR_ANNOTATION}: "
                               f"{sorted(str(v) for v in values)}; using the largest", key))
    numbers = [n for n in map(quantity.digits, map(str, values)) if n]
    if not numbers:
        found.append(f.warning("replication-factor-invalid", f"{REPLICATION_FACTOR_ANNOTATION} is not a positive "
                               f"integer ({sorted(str(v) for v in values)}); treating the pods as a member quorum",
                               key))
        return None
    return max(numbers)
