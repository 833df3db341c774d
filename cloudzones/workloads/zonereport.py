"""The cluster's zones at a glance, from a snapshot: capacity, workloads' spread, what losing each zone does (pure).

One pass over the snapshot (the shape `outage.snapshot_from_documents` builds) gives, per zone, the
nodes (and how many are Ready), allocatable and requested CPU and memory, the pods bound there and
the PersistentVolumes pinned there; per workload (pods grouped as the outage what-if groups them),
its pods per zone and the skew; and, by running `outage.report` for every zone, what losing that
zone does to each workload. A cell says the worst of: ``ok`` (no member there), ``degraded``
(keeps serving), ``stranded`` (a lost pod's zonal volume keeps it from starting elsewhere),
``unavailable`` (every replica lost) and ``quorum-lost``. Nodes of unzoned VMs carry their fault
domain (``"0"``) in the zone label: such a column is a fault domain (`ZoneRow.kind`), named so
wherever it is said. Findings are the warnings and errors of every zone's what-if, each message
saying which zone's (or fault domain's) loss it is about, and those of the planners for what else
the snapshot holds: the replication planner for every LokiStack, coordinator selection for every
FoundationDBCluster, and data locality for Longhorn's volumes (per namespace).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cloudzones import errors, labels, quantity, topology
from cloudzones.workloads import _manifests as m
from cloudzones.workloads import coordinators, fdblocality, locality, outage, replication
from cloudzones.workloads import findings as f
from cloudzones.workloads import quorum as q

#: Zone-loss verdicts for one workload, mildest first (a cell shows the worst that applies).
VERDICTS = ("ok", "degraded", "stranded", "unavailable", "quorum-lost")
NO_ZONE = "(no zone)"
"""The zone column of nodes without a zone label."""


@dataclasses.dataclass(frozen=True)
class ZoneRow:
    """One zone's capacity and load."""

    zone: str
    nodes: int
    ready: int
    cpu_allocatable: int
    """Millicores."""
    cpu_requested: int
    memory_allocatable: int
    """Bytes."""
    memory_requested: int
    pods: int
    volumes: tuple[str, ...]
    """PersistentVolumes whose node affinity pins them to this zone."""

    @property
    def kind(self) -> str:
        """``zone``; ``faultDomain`` for an unzoned VM's fault domain (``"0"``); ``none`` for `NO_ZONE`."""
        return column_kind(self.zone)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"zone": self.zone, "kind": self.kind, "nodes": self.nodes, "readyNodes": self.ready,
                "cpu": {"allocatableMillicores": self.cpu_allocatable, "requestedMillicores": self.cpu_requested},
                "memory": {"allocatableBytes": self.memory_allocatable, "requestedBytes": self.memory_requested},
                "pods": self.pods, "pinnedVolumes": list(self.volumes)}


@dataclasses.dataclass(frozen=True)
class WorkloadRow:
    """One workload's pods per zone, and what losing each zone does to it."""

    workload: str
    pods: Mapping[str, int]
    skew: int
    """Most minus fewest pods over the zones that have nodes."""
    loss: Mapping[str, str]
    """Zone → one of `VERDICTS`."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"workload": self.workload, "podsPerZone": dict(self.pods), "skew": self.skew,
                "zoneLoss": dict(self.loss)}


@dataclasses.dataclass(frozen=True)
class ClusterReport:
    """The whole report."""

    zones: tuple[ZoneRow, ...]
    workloads: tuple[WorkloadRow, ...]
    outages: tuple[outage.OutageReport, ...]
    findings: tuple[f.Finding, ...]

    @property
    def ok(self) -> bool:
        """No finding is an error."""
        return not f.has_errors(self.findings)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({"kind": "ZoneReport", "zones": [z.as_dict() for z in self.zones],
                            "workloads": [w.as_dict() for w in self.workloads],
                            "outages": [o.as_dict() for o in self.outages],
                            "findings": f.as_dicts(self.findings), "ok": self.ok})


def column_kind(zone: str) -> str:
    """What a column of the report is: ``zone``, ``faultDomain`` (never to be taken for a zone) or ``none``."""
    if zone == NO_ZONE:
        return "none"
    return "faultDomain" if topology.is_fault_domain(zone) else "zone"


def column_name(zone: str) -> str:
    """How a column is called in words: ``eastus-1``, ``fault domain 0``, ``(no zone)``."""
    return f"fault domain {zone}" if column_kind(zone) == "faultDomain" else zone


def build(snapshot: Mapping[str, Sequence[Mapping[str, Any]]], *, zone_key: str = labels.ZONE) -> ClusterReport:
    """The report for ``snapshot``; `InvalidWorkloadSpec` for a malformed one (as `outage.report`)."""
    nodes = list(snapshot.get("nodes") or [])
    zone_of = {m.name_of(n): m.node_zone(n, zone_key) or NO_ZONE for n in nodes}
    # Availability zones first, then fault domains (by number), then nodes without either.
    zoned = sorted({z for z in zone_of.values() if z != NO_ZONE},
                   key=lambda z: (topology.is_fault_domain(z), int(z) if topology.is_fault_domain(z) else 0, z))
    columns = zoned + ([NO_ZONE] if NO_ZONE in zone_of.values() else [])
    pods = [p for p in snapshot.get("pods") or [] if q.running(p)]
    prepared = outage.prepare(snapshot, zone_key=zone_key)
    outages = tuple(outage.report(snapshot, zone, zone_key=zone_key, prepared=prepared) for zone in zoned)
    rows = _zone_rows(columns, nodes, zone_of, pods, snapshot.get("persistentVolumes") or [])
    workloads = _workload_rows(pods, zone_of, zoned, columns, outages)
    # Warnings and errors of every zone's what-if, said with their zone (the cells already show the mild ones).
    found = [dataclasses.replace(finding, message=f"if {column_name(report.zone)} is lost: {finding.message}")
             for report in outages for finding in report.findings if finding.severity is not f.Severity.INFO]
    found += _planner_findings(snapshot, nodes, pods)
    return ClusterReport(tuple(rows), tuple(workloads), outages, tuple(found))


def _planner_findings(snapshot: Mapping[str, Sequence[Mapping[str, Any]]], nodes: Sequence[Mapping[str, Any]],
                      pods: Sequence[Mapping[str, Any]]) -> list[f.Finding]:
    """The Loki, FoundationDB and Longhorn planners' warnings and errors, each message naming what it is about."""
    found: list[f.Finding] = []
    for stack in snapshot.get("lokiStacks") or []:
        found += _named(f"LokiStack {m.namespace_of(stack)}/{m.name_of(stack)}", replication.plan, stack, nodes)
    for cluster in snapshot.get("foundationDBClusters") or []:
        # Coordinators are chosen from the cluster's running pods; without any, from its processCounts placed
        # as the operator would; with neither (nothing deployed yet), there is nothing to plan.
        processes = fdblocality.processes_from_pods(cluster, pods) if cluster.get("processes") is None else None
        subject = {**cluster, "processes": processes} if processes else cluster
        if subject.get("processes") is not None or (cluster.get("spec") or {}).get("processCounts"):
            found += _named(f"FoundationDBCluster {m.namespace_of(cluster)}/{m.name_of(cluster)}",
                            coordinators.plan, subject, nodes)
    # Longhorn's volumes, replicas, nodes and settings belong together per namespace (its install's).
    parts: dict[str, dict[str, Any]] = collections.defaultdict(
        lambda: {"volumes": [], "replicas": [], "nodes": [], "settings": []})
    for key, part in (("longhornVolumes", "volumes"), ("longhornReplicas", "replicas"), ("longhornNodes", "nodes"),
                      ("longhornSettings", "settings")):
        for item in snapshot.get(key) or []:
            parts[m.namespace_of(item)][part].append(item)
    for namespace in sorted(parts):
        if parts[namespace]["volumes"]:
            found += _named(f"Longhorn in {namespace}", _locality_plan, parts[namespace], nodes)
    return found


def _locality_plan(part: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> locality.LocalityPlan:
    return locality.plan(part["volumes"], part["replicas"], part["nodes"],
                         settings=locality.settings_of(part["settings"]), kube_nodes=nodes)


def _named(where: str, planner: Callable[..., Any], *args: Any) -> list[f.Finding]:
    """A planner's warnings and errors (a malformed input's included), each message prefixed with ``where``."""
    try:
        items: Sequence[f.Finding] = planner(*args).findings
    except errors.InvalidWorkloadSpec as exc:
        items = exc.findings
    return [dataclasses.replace(item, message=f"{where}: {item.message}") for item in items
            if item.severity is not f.Severity.INFO]


def _zone_rows(columns: Sequence[str], nodes: Sequence[Mapping[str, Any]], zone_of: Mapping[str, str],
               pods: Sequence[Mapping[str, Any]], volumes: Sequence[Mapping[str, Any]]) -> list[ZoneRow]:
    totals: dict[str, list[int]] = {zone: [0] * 7 for zone in columns}
    for node in nodes:
        row = totals[zone_of[m.name_of(node)]]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        where = f"node {m.name_of(node)} status.allocatable"
        row[0] += 1
        row[1] += q.node_ready(node)
        row[2] += quantity.millicores(allocatable.get("cpu", 0), f"{where}.cpu")
        row[4] += quantity.whole(allocatable.get("memory", 0), f"{where}.memory")
    memo: dict[tuple[str, object], int] = {}  # a cluster has few distinct request values
    for pod in pods:
        zone = zone_of.get(q.node_of(pod))
        if zone is None:
            continue  # bound to a node the snapshot does not have
        row = totals[zone]
        cpu, memory = _requests(pod, memo)
        row[3] += cpu
        row[5] += memory
        row[6] += 1
    pinned: dict[str, list[str]] = collections.defaultdict(list)
    for volume in volumes:
        zone = pinned_zone(volume)
        if zone:
            pinned[zone].append(m.name_of(volume))
    return [ZoneRow(zone, nodes=t[0], ready=t[1], cpu_allocatable=t[2], cpu_requested=t[3], memory_allocatable=t[4],
                    memory_requested=t[5], pods=t[6], volumes=tuple(sorted(pinned.get(zone, ()))))
            for zone, t in ((zone, totals[zone]) for zone in columns)]


def _requests(pod: Mapping[str, Any], memo: dict[tuple[str, object], int]) -> tuple[int, int]:
    """CPU millicores and memory bytes the pod requests (its containers' sum; init containers run first)."""
    spec = pod.get("spec") or {}
    cpu = memory = 0
    for container in spec.get("containers") or []:
        requests = ((container or {}).get("resources") or {}).get("requests") or {}
        for resource, convert in (("cpu", quantity.millicores), ("memory", quantity.whole)):
            value = requests.get(resource, 0)
            key = (resource, value if isinstance(value, (str, int, float)) else repr(value))
            amount = memo.get(key)
            if amount is None:
                where = f"pod {q.pod_id(pod)} container {(container or {}).get('name', '?')} requests.{resource}"
                amount = memo[key] = convert(value, where)
            if resource == "cpu":
                cpu += amount
            else:
                memory += amount
    return cpu, memory


def pinned_zone(volume: Mapping[str, Any]) -> str:
    """The one zone a PV's required node affinity allows (``zone In [z]`` in every term), else ``""``."""
    required = (((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {})
    zones: set[str] = set()
    for term in required.get("nodeSelectorTerms") or []:
        values = [tuple(e.get("values") or ()) for e in (term or {}).get("matchExpressions") or []
                  if e.get("key") in labels.ZONE_KEYS and e.get("operator") == "In"]
        if not values or any(len(v) != 1 for v in values):
            return ""  # a term without a single zone lets the pod go elsewhere
        zones.update(v[0] for v in values)
    return zones.pop() if len(zones) == 1 else ""


def _workload_rows(pods: Sequence[Mapping[str, Any]], zone_of: Mapping[str, str], zoned: Sequence[str],
                   columns: Sequence[str], outages: Sequence[outage.OutageReport]) -> list[WorkloadRow]:
    per_zone: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for pod in pods:
        group = q.group_of(pod)
        zone = zone_of.get(q.node_of(pod))
        if group is not None and zone is not None:
            per_zone[group][zone] += 1
    loss: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for report in outages:
        for impact in report.workloads:
            _worse(loss[impact.workload], report.zone, impact.status)
        stranded_ids = {s.pod for s in report.unschedulable}
        owners = {q.pod_id(p): q.group_of(p) for p in pods if q.pod_id(p) in stranded_ids} if stranded_ids else {}
        for stranded in report.unschedulable:
            group = owners.get(stranded.pod)
            if group is not None:
                _worse(loss[group], report.zone, "stranded")
    rows = []
    for group in sorted(set(per_zone) | set(loss)):
        counts = per_zone[group]
        spread = [counts.get(zone, 0) for zone in zoned]
        rows.append(WorkloadRow(group, {zone: counts.get(zone, 0) for zone in columns},
                                max(spread) - min(spread) if spread else 0,
                                {zone: loss[group].get(zone, "ok") for zone in zoned}))
    return rows


def _worse(cells: dict[str, str], zone: str, verdict: str) -> None:
    if VERDICTS.index(verdict if verdict in VERDICTS else "degraded") > VERDICTS.index(cells.get(zone, "ok")):
        cells[zone] = verdict
