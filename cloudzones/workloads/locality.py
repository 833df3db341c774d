"""Longhorn data locality: the mode of each volume and the next reconcile step that keeps a replica local (pure).

Input (a mapping; each list may also come as separate manifests of these kinds)::

    settings: {default-data-locality: disabled, storage-over-provisioning-percentage: "100",
               storage-minimal-available-percentage: "25"}      # Longhorn settings, all optional
    storageClass: {kind: StorageClass, parameters: {dataLocality: best-effort}}    # optional
    volumes:  [volumes.longhorn.io]   spec.numberOfReplicas, dataLocality, size, diskSelector,
                                      nodeSelector; status.currentNodeID (or spec.nodeID): attached node
    replicas: [replicas.longhorn.io]  spec.volumeName, nodeID, diskID, healthyAt, failedAt, hardNodeAffinity
    nodes:    [nodes.longhorn.io]     spec.allowScheduling, tags, disks{allowScheduling, evictionRequested,
                                      storageReserved, tags}; status.zone, conditions,
                                      diskStatus{storageAvailable, storageMaximum, storageScheduled, diskUUID}

Mode: the volume's ``spec.dataLocality``; for a volume being created (no ``status`` yet) without
one, the StorageClass parameter ``dataLocality``, else the ``default-data-locality`` setting. An
existing volume without the field was created before the feature and is ``disabled``. One step
per reconcile, as Longhorn does: best-effort without any replica on the attached node (whatever
its state) nor one pending with hard node affinity to it → add one there if a disk fits (else say
why and leave the volume alone); more healthy replicas than wanted and a local one → remove exactly
one, chosen by ``replica_to_remove`` (deterministic, unlike Longhorn's map order). A mode change
shows in the next plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones import errors, labels, placement, quantity, shapes
from cloudzones.workloads import _manifests as m
from cloudzones.workloads import findings as f

MODES = ("disabled", "best-effort", "strict-local")
DEFAULT_SETTING = "default-data-locality"
NEW_REPLICA = "(new local replica)"


@dataclasses.dataclass(frozen=True)
class VolumePlan:
    """The next data-locality step for one volume."""

    volume: str
    mode: str
    mode_source: str
    """``volume``, ``legacy`` (existing volume without the field), ``storageClass`` or ``default``."""
    engine_node: str
    healthy: tuple[str, ...]
    action: str = "none"
    """``none``, ``add-replica`` or ``remove-replica``."""
    node: str = ""
    disk: str = ""
    remove: str = ""
    """The replica to delete (``remove-replica``)."""
    then_remove: str = ""
    """After an added replica is rebuilt: the replica the following reconcile removes."""
    reason: str = ""
    findings: tuple[f.Finding, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({"volume": self.volume, "mode": self.mode, "modeSource": self.mode_source,
                            "engineNode": self.engine_node, "healthyReplicas": self.healthy, "action": self.action,
                            "node": self.node, "disk": self.disk, "remove": self.remove,
                            "thenRemove": self.then_remove, "reason": self.reason,
                            "findings": f.as_dicts(self.findings)})


@dataclasses.dataclass(frozen=True)
class LocalityPlan:
    """Plans for every volume."""

    volumes: tuple[VolumePlan, ...]

    @property
    def findings(self) -> tuple[f.Finding, ...]:
        """Every volume's findings."""
        return tuple(x for v in self.volumes for x in v.findings)

    @property
    def ok(self) -> bool:
        """No error findings."""
        return not f.has_errors(self.findings)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kind": "LocalityPlan", "volumes": [v.as_dict() for v in self.volumes],
                "findings": f.as_dicts(self.findings), "ok": self.ok}


def check_mode(value: str, where: str, subject: str = "") -> str:
    """``value`` when it is a mode (``""`` reads as disabled); `InvalidWorkloadSpec` listing the valid ones."""
    mode = value or "disabled"
    if mode not in MODES:
        raise f.invalid("unknown-data-locality", f"data locality {value!r} from {where} is not valid; valid: "
                        f"{', '.join(MODES)}", subject)
    return mode


def resolve_mode(volume: Mapping[str, Any], *, storage_class: Mapping[str, Any] | None = None,
                 default: str = "disabled") -> tuple[str, str]:
    """(mode, source): volume > StorageClass ``dataLocality`` > global default; legacy volumes are disabled."""
    name = m.name_of(volume)
    spec = m.mapping(volume.get("spec"), "spec", name)
    if "dataLocality" in spec:
        return check_mode(str(spec.get("dataLocality") or ""), "the volume's spec.dataLocality", name), "volume"
    if volume.get("status"):
        return "disabled", "legacy"
    parameters = m.mapping((storage_class or {}).get("parameters"), "StorageClass parameters", name)
    if parameters.get("dataLocality"):
        return check_mode(str(parameters["dataLocality"]), "the StorageClass parameter dataLocality", name), \
            "storageClass"
    return check_mode(default, f"the {DEFAULT_SETTING} setting", name), "default"


def settings_of(objects: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Longhorn ``Setting`` objects as the ``{name: value}`` map `plan` takes."""
    return {m.name_of(s): s.get("value") for s in objects}


def healthy(replica: Mapping[str, Any]) -> bool:
    """Rebuilt at some point, not failed since, not being deleted."""
    spec = replica.get("spec") or {}
    if (replica.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return bool(spec.get("healthyAt")) and not spec.get("failedAt")


def plan(volumes: Sequence[Mapping[str, Any]], replicas: Sequence[Mapping[str, Any]],
         nodes: Sequence[Mapping[str, Any]], *, storage_class: Mapping[str, Any] | None = None,
         settings: Mapping[str, Any] | None = None, kube_nodes: Sequence[Mapping[str, Any]] = ()) -> LocalityPlan:
    """One `VolumePlan` per volume (``nodes`` are Longhorn Node objects; ``kube_nodes`` only add zones)."""
    # A malformed volume is a finding of its own (the others are still planned): checked in _plan_volume.
    m.shaped(list(volumes), shapes.ListOf(shapes.MapOf(shapes.ANY)), "volumes")
    for where, items, schema in (("replicas", replicas, shapes.LONGHORN_REPLICA), ("nodes", nodes,
                                  shapes.LONGHORN_NODE), ("kube nodes", kube_nodes, shapes.NODE)):
        m.shaped(list(items), shapes.ListOf(schema), where)
    m.shaped(storage_class, shapes.STORAGE_CLASS, "storageClass")
    m.shaped(settings, shapes.MapOf(shapes.ANY), "settings")
    options = dict(settings or {})
    default = str(options.get(DEFAULT_SETTING) or "disabled")
    over = m.positive_int(options.get("storage-over-provisioning-percentage", 100),
                          "storage-over-provisioning-percentage", minimum=0)
    minimal = m.positive_int(options.get("storage-minimal-available-percentage", 25),
                             "storage-minimal-available-percentage", minimum=0)
    by_node = {m.name_of(n): n for n in nodes}
    zones = {m.name_of(n): m.node_zone(n, labels.ZONE) for n in kube_nodes}
    zones.update({name: str((n.get("status") or {}).get("zone") or "") or zones.get(name, "")
                  for name, n in by_node.items()})
    context = _Context(by_node, zones, storage_class, default, over, minimal)
    # By name, not input order: the API server lists by name, a file keeps its own order, and both must plan alike.
    ordered = sorted(volumes, key=lambda v: (m.namespace_of(v), m.name_of(v)))
    return LocalityPlan(tuple(_plan_volume(v, replicas, context) for v in ordered))


@dataclasses.dataclass(frozen=True)
class _Context:
    nodes: Mapping[str, Mapping[str, Any]]
    zones: Mapping[str, str]
    storage_class: Mapping[str, Any] | None
    default: str
    over: int
    minimal: int


def _plan_volume(volume: Mapping[str, Any], all_replicas: Sequence[Mapping[str, Any]], context: _Context) -> VolumePlan:
    name = m.name_of(volume)
    try:
        spec = m.mapping(volume.get("spec"), "spec", name)
        status = m.mapping(volume.get("status"), "status", name)
        m.shaped(volume, shapes.LONGHORN_VOLUME, "", name)
    except errors.InvalidWorkloadSpec as exc:
        return VolumePlan(name, "", "", "", (), reason=exc.findings[0].message, findings=exc.findings)
    engine = str(status.get("currentNodeID") or spec.get("nodeID") or "")
    try:
        mode, source = resolve_mode(volume, storage_class=context.storage_class, default=context.default)
        wanted = m.positive_int(spec.get("numberOfReplicas", 3), "spec.numberOfReplicas", name)
    except errors.InvalidWorkloadSpec as exc:
        return VolumePlan(name, "", "", engine, (), reason="; ".join(x.message for x in exc.findings),
                          findings=exc.findings)
    mine = [r for r in all_replicas if (r.get("spec") or {}).get("volumeName") == name and healthy(r)]
    zones = context.zones
    replicas = sorted(placement.Replica(m.name_of(r), str(r["spec"].get("nodeID") or ""),
                                        str(r["spec"].get("diskID") or ""),
                                        zones.get(str(r["spec"].get("nodeID") or ""), "")) for r in mine)
    base = VolumePlan(name, mode, source, engine, tuple(r.name for r in replicas))
    local = [r for r in replicas if engine and r.node == engine]
    if mode == "strict-local":
        problems = []
        if wanted != 1:
            problems.append(f.error("strict-local-replicas", f"strict-local needs exactly 1 replica, the volume asks "
                                    f"for {wanted} (Longhorn: number of replica count should be 1 when data "
                                    "locality is strict-local)", name))
        if engine and replicas and not local:
            problems.append(f.error("strict-local-moved", f"the volume is attached to {engine!r} but its replica is "
                                    f"on {replicas[0].node!r}; Longhorn does not move a strict-local volume", name))
        return dataclasses.replace(base, reason="strict-local keeps its single replica on the attached node",
                                   findings=tuple(problems))
    if mode == "disabled":
        return dataclasses.replace(base, reason="data locality is disabled: nothing to do")
    if not engine:
        return dataclasses.replace(base, reason="the volume is detached: locality applies once it is attached")
    if not local:
        # Longhorn's hasLocalReplicaOnSameNodeAsEngine: any replica of the volume on the engine's node,
        # whatever its state (one still rebuilding), or one pending with hard node affinity to it,
        # already is the local replica; planning another would give the volume two.
        underway = _local_underway(name, engine, all_replicas)
        if underway:
            return dataclasses.replace(base, reason=f"replica {underway[0]!r} {underway[1]}: it is the local "
                                       "replica once rebuilt, so none is added")
    if local:
        if len(replicas) > wanted:
            victim = placement.replica_to_remove(replicas, engine)
            return dataclasses.replace(base, action="remove-replica", remove=victim.name, reason=(
                f"{len(replicas)} healthy replicas for {wanted} wanted and one is local: remove {victim.name!r} "
                f"({_why(victim, replicas)})"))
        return dataclasses.replace(base, reason=f"the local replica {local[0].name!r} is kept")
    disk, why_not = _local_disk(volume, context.nodes.get(engine), engine, context.over, context.minimal)
    if disk is None:
        message = f"no replica on the attached node {engine!r} and none can be added there: {why_not}"
        return dataclasses.replace(base, reason=message + "; the volume is left as it is",
                                   findings=(f.warning("no-local-disk", message, name),))
    then = ""
    if len(replicas) + 1 > wanted:
        added = placement.Replica(NEW_REPLICA, engine, disk, zones.get(engine, ""))
        then = placement.replica_to_remove([*replicas, added], engine).name
    return dataclasses.replace(base, action="add-replica", node=engine, disk=disk, then_remove=then,
                               reason=f"best-effort: add a replica on the attached node {engine!r}, disk {disk!r}")


def _local_underway(volume: str, engine: str, replicas: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """(name, what) of a replica that is not healthy yet but already local to ``engine``, else None."""
    for replica in sorted(replicas, key=m.name_of):
        spec = replica.get("spec") or {}
        if spec.get("volumeName") != volume:
            continue
        if str(spec.get("nodeID") or "") == engine:
            return m.name_of(replica), f"is on the attached node {engine!r} (not healthy yet)"
        if str(spec.get("hardNodeAffinity") or "") == engine:
            return m.name_of(replica), f"is pending with hard node affinity to the attached node {engine!r}"
    return None


def _why(victim: placement.Replica, replicas: Sequence[placement.Replica]) -> str:
    if victim.disk and sum(1 for r in replicas if (r.node, r.disk) == (victim.node, victim.disk)) > 1:
        return f"it shares disk {victim.disk!r} on {victim.node!r} with another replica"
    if sum(1 for r in replicas if r.node == victim.node) > 1:
        return f"it shares node {victim.node!r} with another replica"
    if victim.zone and sum(1 for r in replicas if r.zone == victim.zone) > 1:
        return f"it shares zone {victim.zone!r} with another replica"
    return "no two replicas share a disk, node or zone: the first non-local one by name"


def _local_disk(volume: Mapping[str, Any], node: Mapping[str, Any] | None, name: str, over: int,
                minimal: int) -> tuple[str | None, str]:
    """(disk name, "") for the roomiest fitting disk on the attached node, else (None, why)."""
    if node is None:
        return None, f"{name!r} is not a Longhorn node"
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    if spec.get("allowScheduling") is False:
        return None, f"scheduling is disabled on node {name!r}"
    if not _condition(status, "Ready"):
        return None, f"node {name!r} is not Ready"
    vspec = volume.get("spec") or {}
    wanted_tags = set(vspec.get("nodeSelector") or [])
    if not wanted_tags <= set(spec.get("tags") or []):
        return None, f"node {name!r} lacks tag(s) {sorted(wanted_tags - set(spec.get('tags') or []))}"
    size = _bytes(vspec.get("size"))
    actual = _bytes((volume.get("status") or {}).get("actualSize"))
    disk_tags = set(vspec.get("diskSelector") or [])
    fits: list[tuple[int, str]] = []
    reasons: list[str] = []
    disk_status = status.get("diskStatus") or {}
    for disk_name, disk in sorted((spec.get("disks") or {}).items()):
        state = disk_status.get(disk_name) or {}
        maximum, reserved = _bytes(state.get("storageMaximum")), _bytes(disk.get("storageReserved"))
        available, scheduled = _bytes(state.get("storageAvailable")), _bytes(state.get("storageScheduled"))
        room = (maximum - reserved) * over // 100 - scheduled
        if disk.get("allowScheduling") is False:
            reasons.append(f"{disk_name}: scheduling disabled")
        elif disk.get("evictionRequested"):
            reasons.append(f"{disk_name}: eviction requested")
        elif not _condition(state, "Schedulable"):
            reasons.append(f"{disk_name}: not schedulable")
        elif not disk_tags <= set(disk.get("tags") or []):
            reasons.append(f"{disk_name}: lacks tag(s) {sorted(disk_tags - set(disk.get('tags') or []))}")
        elif available - actual <= maximum * minimal // 100:
            reasons.append(f"{disk_name}: {_gib(available)} available, at or below the {minimal}% minimum of "
                           f"{_gib(maximum)}")
        elif size > room:
            reasons.append(f"{disk_name}: {_gib(size)} does not fit in {_gib(max(room, 0))} schedulable "
                           f"({over}% over-provisioning)")
        else:
            fits.append((-room, disk_name))
    if fits:
        return min(fits)[1], ""
    return None, "; ".join(reasons) or f"node {name!r} has no disks"


def _condition(status: Mapping[str, Any], kind: str) -> bool:
    """Whether condition ``kind`` is True; a status without it counts as True (not reported)."""
    conditions = status.get("conditions") or []
    if isinstance(conditions, Mapping):  # v1beta1 kept conditions in a map keyed by type
        conditions = [{"type": k, **v} for k, v in conditions.items() if isinstance(v, Mapping)]
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return str(condition.get("status")) == "True"
    return True


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _bytes(value: Any) -> int:
    """Longhorn writes sizes as byte strings; ``10Gi`` is accepted too; anything else reads as 0."""
    text = str(value or 0).strip()
    factor = _SUFFIXES.get(text[-2:], 1)
    if factor > 1:
        text = text[:-2]
    return (quantity.digits(text) or 0) * factor
