"""What losing one zone does to a cluster, read from a snapshot: quorum, stranded volumes, FDB coordinators (pure).

Snapshot: a mapping ``{nodes, pods, persistentVolumeClaims, persistentVolumes, foundationDBClusters,
statefulSets}``
of manifest lists (what ``kubectl get -o yaml`` prints; the CLI also takes a ``v1`` List or several
YAML documents and sorts them by ``kind``). Losing zone Z removes every node whose zone label is Z
and every pod bound to those nodes. Then:

- **Workloads** (pods grouped by their controller owner, else by the FoundationDB cluster label, the
  ``app.kubernetes.io/instance`` / ``name`` / ``component`` labels or ``app``; DaemonSet pods are
  left out). Quorum is counted against the *desired* membership, so members already down (Pending,
  not Running, on a NotReady node, or missing) count as lost: a group whose pods carry the
  annotation ``cloudzones.io/replication-factor`` is a zone-aware store (Loki ingesters): each key
  has one replica per zone and writes need ``rf // 2 + 1`` of the ``rf``, at worst every zone with
  a down member holds one of the key's replicas; a StatefulSet is a quorum of its ``spec.replicas``
  members (from the snapshot's StatefulSet, else the pods and their ordinals): a majority must
  survive; a FoundationDB cluster serves while its coordinators keep their majority (the same
  verdict as the coordinators section); any other group is stateless replicas, down only when
  every replica is lost.
- **Unschedulable pods**: a lost pod whose claim's PersistentVolume has a ``nodeAffinity`` that no
  surviving node satisfies cannot start anywhere (a zonal disk in Z); it stays Pending until Z
  returns or the claim is deleted, losing its data.
- **FoundationDB coordinators**: the addresses in a FoundationDBCluster's ``status.connectionString``
  matched to pods by IP (``status.podIP``/``podIPs``) or by DNS name (first label = pod name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones import labels, shapes, topology
from cloudzones.placement import selectors
from cloudzones.workloads import _manifests as m
from cloudzones.workloads import findings as f
from cloudzones.workloads import quorum as q

# Re-exported: callers read them from here.
FDB_CLUSTER_LABEL = q.FDB_CLUSTER_LABEL
REPLICATION_FACTOR_ANNOTATION = q.REPLICATION_FACTOR_ANNOTATION
WorkloadImpact = q.WorkloadImpact
SNAPSHOT_KEYS = ("nodes", "pods", "persistentVolumeClaims", "persistentVolumes", "foundationDBClusters",
                 "statefulSets", "lokiStacks", "longhornVolumes", "longhornReplicas", "longhornNodes",
                 "longhornSettings")
#: Longhorn's kinds (``longhorn.io`` API group) → snapshot key: its ``Node`` is not Kubernetes' one.
LONGHORN_KINDS = {"Volume": "longhornVolumes", "Replica": "longhornReplicas", "Node": "longhornNodes",
                  "Setting": "longhornSettings"}


@dataclasses.dataclass(frozen=True)
class StrandedPod:
    """A lost pod that cannot be scheduled elsewhere because of a volume's node affinity."""

    pod: str
    claims: tuple[str, ...]
    volumes: tuple[str, ...]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({"pod": self.pod, "claims": self.claims, "volumes": self.volumes, "reason": self.reason})


@dataclasses.dataclass(frozen=True)
class CoordinatorImpact:
    """One FoundationDB cluster's coordinators after the loss."""

    cluster: str
    coordinators: tuple[str, ...]
    lost: tuple[str, ...]
    unknown: tuple[str, ...]
    """Addresses matching no pod in the snapshot (assumed to survive)."""
    quorum: int
    survives: bool

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({"cluster": self.cluster, "coordinators": self.coordinators, "lost": self.lost,
                            "unknown": self.unknown, "quorum": self.quorum, "survives": self.survives})


@dataclasses.dataclass(frozen=True)
class OutageReport:
    """Everything losing ``zone`` breaks."""

    zone: str
    nodes_lost: tuple[str, ...]
    pods_lost: tuple[str, ...]
    workloads: tuple[WorkloadImpact, ...]
    unschedulable: tuple[StrandedPod, ...]
    coordinators: tuple[CoordinatorImpact, ...]
    findings: tuple[f.Finding, ...]

    @property
    def ok(self) -> bool:
        """Nothing loses quorum and no pod is stranded."""
        return not f.has_errors(self.findings)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({
            "kind": "OutageReport", "zone": self.zone, "nodesLost": self.nodes_lost, "podsLost": self.pods_lost,
            "workloads": [w.as_dict() for w in self.workloads],
            "unschedulable": [p.as_dict() for p in self.unschedulable],
            "coordinators": [c.as_dict() for c in self.coordinators],
            "findings": f.as_dicts(self.findings), "ok": self.ok})


def snapshot_from_documents(documents: Sequence[Any], *, checked: bool = False) -> dict[str, list[Mapping[str, Any]]]:
    """Sort manifests (or a snapshot mapping, or ``List``s) into the snapshot keys by ``kind``.

    ``checked``: the documents come from `documents.load_streamed` with `compact.SnapshotItems`, which
    shape-checked a top-level single mapping's lists and the items of a top-level ``List`` or list as
    it read them; those are not checked again (anything nested deeper is checked here).
    """
    kinds = {"Node": "nodes", "Pod": "pods", "PersistentVolumeClaim": "persistentVolumeClaims",
             "PersistentVolume": "persistentVolumes", "FoundationDBCluster": "foundationDBClusters",
             "StatefulSet": "statefulSets", "LokiStack": "lokiStacks"}
    result: dict[str, list[Mapping[str, Any]]] = {key: [] for key in SNAPSHOT_KEYS}
    # A stack, last item on top: a 150,000-item List is taken in order without shifting the rest each time.
    pending: list[tuple[Any, int]] = [(doc, 0) for doc in reversed(documents)]
    while pending:
        doc, level = pending.pop()
        if isinstance(doc, list):  # a document that is a bare list of manifests
            pending.extend((item, level + 1) for item in reversed(doc))
            continue
        if not isinstance(doc, Mapping):
            raise f.invalid("snapshot", f"expected manifests, found {doc!r:.60}")
        if checked and level != 1 and "kind" in doc:  # a document of its own, or nested: not seen by the reader
            shapes.check_manifest(doc)
        if "items" in doc:
            pending.extend((item, level + 1) for item in reversed(m.sequence(doc.get("items"), "items")))
        elif str(doc.get("apiVersion", "")).startswith("longhorn.io/") and doc.get("kind") in LONGHORN_KINDS:
            result[LONGHORN_KINDS[doc["kind"]]].append(doc)
        elif isinstance(doc.get("kind"), str) and doc["kind"] in kinds:  # a kind may be any YAML value
            result[kinds[doc["kind"]]].append(doc)
        elif any(key in doc for key in SNAPSHOT_KEYS) and "kind" not in doc:
            if not checked or level > 0:
                m.shaped(doc, shapes.SNAPSHOT)
            for key in SNAPSHOT_KEYS:
                result[key].extend(m.sequence(doc.get(key), key))
        else:
            raise f.invalid("snapshot", f"unexpected manifest kind {doc.get('kind')!r} in the snapshot; "
                            f"expected {', '.join(kinds)} or Longhorn's {', '.join(LONGHORN_KINDS)}")
    return result


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What every zone's what-if reads of one snapshot, computed once (`prepare`): nodes, pods and their groups."""

    nodes: tuple[Mapping[str, Any], ...]
    zone_of: Mapping[str, str]
    not_ready: frozenset[str]
    every_pod: tuple[Mapping[str, Any], ...]
    pods: tuple[Mapping[str, Any], ...]
    """The running (bound, not finished, not being deleted) ones."""
    groups: Mapping[str, list[Mapping[str, Any]]]
    desired: Mapping[str, int]


def prepare(snapshot: Mapping[str, Sequence[Mapping[str, Any]]], *, zone_key: str = labels.ZONE) -> Prepared:
    """The zone-independent part of `report`, for asking about several zones of one snapshot."""
    nodes = tuple(snapshot.get("nodes") or [])
    m.node_names(nodes)
    every_pod = tuple(snapshot.get("pods") or [])
    return Prepared(nodes, {m.name_of(n): m.node_zone(n, zone_key) for n in nodes},
                    frozenset(m.name_of(n) for n in nodes if not q.node_ready(n)), every_pod,
                    tuple(p for p in every_pod if q.running(p)), q.group_pods(every_pod),
                    q.desired_replicas(snapshot.get("statefulSets") or []))


def report(snapshot: Mapping[str, Sequence[Mapping[str, Any]]], zone: str, *,
           zone_key: str = labels.ZONE, prepared: Prepared | None = None) -> OutageReport:
    """What losing ``zone`` does; `InvalidWorkloadSpec` when no node is in that zone.

    ``prepared``: `prepare` of the same snapshot and zone key, when several zones are asked about.
    """
    ready = prepared or prepare(snapshot, zone_key=zone_key)
    lost_nodes = {name for name, z in ready.zone_of.items() if z == zone}
    if not lost_nodes:
        zones = sorted(set(ready.zone_of.values()) - {""})
        raise f.invalid("unknown-zone", f"no node has {zone_key}={zone!r}; the snapshot's zones are "
                        f"{m.some(zones) or 'none'}")
    lost = [p for p in ready.pods if q.node_of(p) in lost_nodes]
    found: list[f.Finding] = []
    later: list[f.Finding] = []
    # Coordinators first: an FDB cluster's row in the workloads table takes their verdict.
    coordinators = _coordinators(snapshot.get("foundationDBClusters") or [], ready.pods, lost_nodes, later)
    context = q.Context(lost_nodes, ready.zone_of, set(ready.not_ready), ready.desired,
                        {c.cluster: c for c in coordinators}, topology.noun(zone))
    workloads = q.workloads(ready.every_pod, context, found, groups=ready.groups)
    survivors = [n for n in ready.nodes if m.name_of(n) not in lost_nodes]
    stranded = _stranded(lost, snapshot, survivors, zone, found)
    found.extend(later)
    return OutageReport(zone, tuple(sorted(lost_nodes)), tuple(sorted(q.pod_id(p) for p in lost)), tuple(workloads),
                        tuple(stranded), tuple(coordinators), tuple(found))


def _stranded(lost: Sequence[Mapping[str, Any]], snapshot: Mapping[str, Sequence[Mapping[str, Any]]],
              survivors: Sequence[Mapping[str, Any]], zone: str, found: list[f.Finding]) -> list[StrandedPod]:
    claims = {(m.namespace_of(c), m.name_of(c)): c for c in snapshot.get("persistentVolumeClaims") or []}
    volumes = {m.name_of(v): v for v in snapshot.get("persistentVolumes") or []}
    nodes = [(m.name_of(n), m.labels_of(n)) for n in survivors]
    # PVs of one zone share one affinity: decide each distinct affinity once, not once per pod.
    placeable: dict[str, bool] = {}
    result = []
    for pod in sorted(lost, key=q.pod_id):
        names, pinned, reasons = [], [], []
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim_name = ((volume or {}).get("persistentVolumeClaim") or {}).get("claimName")
            claim = claims.get((m.namespace_of(pod), str(claim_name))) if claim_name else None
            pv = volumes.get(str(((claim or {}).get("spec") or {}).get("volumeName") or ""))
            required = (((pv or {}).get("spec") or {}).get("nodeAffinity") or {}).get("required")
            if pv is None or not required:
                continue
            key = repr(required)
            if key not in placeable:
                affinity = selectors.volume_node_affinity(((pv or {}).get("spec") or {}).get("nodeAffinity"))
                placeable[key] = any(affinity.matches(name, node_labels) for name, node_labels in nodes)
            if not placeable[key]:
                names.append(str(claim_name))
                pinned.append(m.name_of(pv))
                reasons.append(f"PV {m.name_of(pv)!r} requires {_describe(required)}")
        if pinned:
            place = topology.noun(zone)
            reason = ("; ".join(reasons) + f": no node outside {place} {zone!r} matches, so the pod stays Pending "
                      f"until the {place} returns or the claim is deleted (losing its data)")
            result.append(StrandedPod(q.pod_id(pod), tuple(names), tuple(pinned), reason))
            found.append(f.error("volume-pinned", reason, q.pod_id(pod)))
    return result


def _describe(required: Mapping[str, Any]) -> str:
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        parts = [f"{e.get('key')} {e.get('operator')} {list(e.get('values') or [])}"
                 for e in (term or {}).get("matchExpressions") or []]
        parts += [f"{e.get('key')} {e.get('operator')} {list(e.get('values') or [])}"
                  for e in (term or {}).get("matchFields") or []]
        terms.append(" and ".join(parts) or "(empty term)")
    return " or ".join(terms) or "no node"


def parse_connection_string(text: str) -> list[str]:
    """Coordinator addresses of ``desc:id@addr,addr`` as ``host`` (port and ``:tls`` dropped)."""
    _, at, rest = text.partition("@")
    if not at:
        return []
    hosts = []
    for address in rest.split(","):
        address = address.strip()
        if address.startswith("["):  # [v6]:port
            hosts.append(address[1:address.find("]")])
        elif address:
            hosts.append(address.split(":")[0])
    return hosts


def _coordinators(clusters: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], lost_nodes: set[str],
                  found: list[f.Finding]) -> list[CoordinatorImpact]:
    by_address: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        status = pod.get("status") or {}
        for ip in [status.get("podIP"), *((p or {}).get("ip") for p in status.get("podIPs") or [])]:
            if ip:
                by_address[str(ip)] = pod
        by_address.setdefault(m.name_of(pod), pod)
    result = []
    for cluster in clusters:
        name = f"{m.namespace_of(cluster)}/{m.name_of(cluster)}"
        hosts = parse_connection_string(str((cluster.get("status") or {}).get("connectionString") or ""))
        if not hosts:
            found.append(f.warning("no-connection-string", "status.connectionString is missing or malformed", name))
            continue
        lost: list[str] = []
        unknown: list[str] = []
        for host in hosts:
            match = by_address.get(host) or by_address.get(host.split(".")[0])
            if match is None:
                unknown.append(host)
            elif q.node_of(match) in lost_nodes:
                lost.append(f"{host} ({m.name_of(match)})")
        quorum = len(hosts) // 2 + 1
        survives = len(hosts) - len(lost) >= quorum
        result.append(CoordinatorImpact(name, tuple(hosts), tuple(lost), tuple(unknown), quorum, survives))
        text = f"{len(lost)} of {len(hosts)} coordinator(s) lost, a majority needs {quorum}"
        if unknown:
            found.append(f.warning("coordinator-unknown", f"coordinator(s) {m.some(unknown)} match no pod in the "
                                   "snapshot and are assumed to survive", name))
        if not survives:
            found.append(f.error("coordinators-lost", text + ": the database is unavailable", name))
        elif lost:
            found.append(f.info("coordinators-degraded", text, name))
    return result
