"""FoundationDB coordinator selection for three_data_hall / three_datacenter / flat clusters (the FDB operator design).

Input: a ``FoundationDBCluster`` manifest (``spec.databaseConfiguration.redundancy_mode`` and
``usable_regions``, the design's ``spec.localities``, ``spec.coordinatorSelection``, ``spec.version``,
``spec.processCounts``), optionally a top-level ``processes`` list (``{id, processClass, node, env,
version, excluded}``; without it, ``processCounts`` pods are placed with ``plan_spread`` under the
generated spread stanzas) and the Node manifests. Coordinators: 9 for three_data_hall,
three_datacenter and multi-region, else 1 / 3 / 5 for single / double / triple; hard limits
``zoneid: 1`` plus ``data_hall: 3`` / ``dcid: 3`` (multi-region: ``dcid: ceil(9 / DCs)``, the data
centres of ``databaseConfiguration.regions`` as the operator's ``GetHardLimits`` counts them, else
those any process names, excluded ones included); chosen by
``choose_distributed``, so halls are balanced at every prefix, higher-priority classes win and the
same input always gives the same coordinators. With ``zoneid`` limited to 1 and halls to 3, nine
coordinators need **three distinct zones in each of the three halls** (the design's "at least 2" is
not enough); the plan says which hall falls short.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones import errors, placement, shapes
from cloudzones.workloads import _manifests as m
from cloudzones.workloads import fdblocality as loc
from cloudzones.workloads import findings as f

MODES = ("single", "double", "triple", "three_data_hall", "three_datacenter")
STATEFUL_CLASSES = ("storage", "log", "transaction", "coordinator")
CLUSTER_LABEL = "foundationdb.org/fdb-cluster-name"
CLASS_LABEL = "foundationdb.org/fdb-process-class"
#: Go's math.MinInt: processes not on the cluster's version sort after every other candidate.
_LAST_RESORT = -(2**63)
#: The locality that must hold exactly three values, per mode.
_SPLIT_KEY = {"three_data_hall": loc.DATA_HALL, "three_datacenter": loc.DCID}


@dataclasses.dataclass(frozen=True)
class Coordinator:
    """A chosen coordinator."""

    id: str
    process_class: str
    node: str
    localities: Mapping[str, str]
    """``locality_*`` → value."""


@dataclasses.dataclass(frozen=True)
class CoordinatorPlan:
    """Coordinators chosen for one cluster, the stanzas that spread its pods, and the findings."""

    name: str
    redundancy_mode: str
    usable_regions: int
    desired: int
    hard_limits: Mapping[str, int]
    coordinators: tuple[Coordinator, ...]
    processes: tuple[tuple[str, str, str], ...]
    """(id, class, node) of every process considered."""
    stanzas: Mapping[str, Mapping[str, Any]]
    """Process class → ``{topologySpreadConstraints, affinity}`` for its pod template."""
    findings: tuple[f.Finding, ...]
    hard_limits_enforced: bool = True
    """False for the what-if without hard limits."""

    @property
    def ok(self) -> bool:
        """No error findings."""
        return not f.has_errors(self.findings)

    def distribution(self, key: str) -> dict[str, int]:
        """Coordinators per value of locality ``key`` (unprefixed)."""
        return dict(Counter(c.localities.get(loc.PREFIX + key, "") for c in self.coordinators))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({
            "kind": "CoordinatorPlan", "name": self.name, "redundancyMode": self.redundancy_mode,
            "usableRegions": self.usable_regions, "desired": self.desired, "hardLimits": dict(self.hard_limits),
            "hardLimitsEnforced": self.hard_limits_enforced,
            "coordinators": [{"id": c.id, "processClass": c.process_class, "node": c.node,
                              "localities": dict(c.localities)} for c in self.coordinators],
            "processes": [{"id": i, "processClass": c, "node": n} for i, c, n in self.processes],
            "stanzas": {k: dict(v) for k, v in self.stanzas.items()},
            "findings": f.as_dicts(self.findings), "ok": self.ok})


def desired_coordinators(redundancy_mode: str, usable_regions: int = 1) -> int:
    """9 for three_data_hall, three_datacenter or several regions; else 1, 3, 5 for single, double, triple."""
    if usable_regions > 1 or redundancy_mode in _SPLIT_KEY:
        return 9
    return {"single": 1, "double": 3, "triple": 5}[redundancy_mode]


def hard_limits(redundancy_mode: str, usable_regions: int = 1, datacenters: int = 1) -> dict[str, int]:
    """The per-value limits: ``zoneid: 1``, plus the hall/DC limit of the mode or of multi-region."""
    limits = {loc.ZONEID: 1}
    if usable_regions > 1:
        limits[loc.DCID] = math.ceil(desired_coordinators(redundancy_mode, usable_regions) / max(1, datacenters))
    elif redundancy_mode in _SPLIT_KEY:
        limits[_SPLIT_KEY[redundancy_mode]] = 3
    return limits


def class_priority(process_class: str, selection: Mapping[str, int] | None) -> int | None:
    """The FDB operator's candidate priority, or None when the class may not be a coordinator."""
    if process_class not in STATEFUL_CLASSES:
        return None
    if selection:
        return selection.get(process_class)
    return 1 if process_class in ("log", "transaction") else 0


def pod_stanzas(cluster: str, process_class: str, specs: Sequence[loc.LocalitySpec]) -> dict[str, Any]:
    """Spread (DoNotSchedule, maxSkew 1) and preferred anti-affinity per distinct locality topologyKey."""
    selector = {"matchLabels": {CLUSTER_LABEL: cluster, CLASS_LABEL: process_class}}
    keys = list(dict.fromkeys(s.topology_key for s in specs if s.topology_key))
    return {
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": k, "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": selector} for k in keys],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": k, "labelSelector": selector}} for k in keys]}}}


def plan(manifest: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], *,
         enforce_hard_limits: bool = True) -> CoordinatorPlan:
    """Resolve localities, check the mode's requirements and choose the coordinators.

    ``enforce_hard_limits=False`` is a what-if (FoundationDB itself always enforces them): zones
    may then hold several coordinators, which is reported as a warning. Raises
    `InvalidWorkloadSpec` only for a malformed manifest.
    """
    m.shaped(manifest, shapes.FDB_CLUSTER)
    m.shaped(list(nodes), shapes.ListOf(shapes.NODE), "nodes")
    name = m.name_of(manifest) or "fdb"
    spec = m.mapping(manifest.get("spec"), "spec", name)
    config = m.mapping(spec.get("databaseConfiguration"), "spec.databaseConfiguration", name)
    raw_mode = config.get("redundancy_mode")
    if raw_mode is not None and not isinstance(raw_mode, str):
        raise f.invalid("redundancy-mode", f"redundancy_mode must be one of {', '.join(MODES)}, got {raw_mode!r:.40}",
                        name)
    mode = raw_mode or "double"
    if mode not in MODES:
        raise f.invalid("redundancy-mode", f"redundancy_mode {mode!r} is not one of {', '.join(MODES)}", name)
    regions = m.positive_int(config.get("usable_regions", 1), "usable_regions", name)
    selection = _selection(spec.get("coordinatorSelection"), name)
    found: list[f.Finding] = []
    specs = _locality_specs(spec, mode, regions, name, found)
    m.node_names(nodes)
    labels_by_node = {m.name_of(n): m.labels_of(n) for n in nodes}
    stanzas = {cls: pod_stanzas(name, cls, specs) for cls in _classes(spec, manifest)}
    processes = _processes(manifest, spec, nodes, stanzas=stanzas, name=name, found=found)
    candidates: list[placement.Candidate] = []
    named_dcs: set[str] = set()
    for process in processes:
        values, problems = loc.resolve(process, specs, labels_by_node)
        if loc.DCID in values:
            named_dcs.add(values[loc.DCID])
        priority = class_priority(process.process_class, selection)
        if process.excluded or priority is None:
            continue
        found.extend(problems)
        if problems:
            continue
        if process.version and spec.get("version") and process.version != str(spec.get("version")):
            priority = _LAST_RESORT + max(priority, 0)
        candidates.append(placement.Candidate(process.id, values, priority))
    count = desired_coordinators(mode, regions)
    # The limit divides by the data centres the cluster is configured with, never by those that
    # still have candidates: with a whole DC excluded the survivors must not absorb its share
    # (9 coordinators split 5 + 4 over two DCs lose their majority with either).
    datacenters = _region_datacenters(config, name) or len(named_dcs)
    limits = hard_limits(mode, regions, datacenters)
    if mode == "three_datacenter":
        found.append(f.info("three-datacenter", "the FoundationDB operator's CRD does not accept three_datacenter; "
                            "this plan follows the design", name))
    shortfalls = _check_split(mode, candidates, enforce_hard_limits, found)
    chosen = _choose(candidates, count, mode, limits=limits if enforce_hard_limits else None,
                     already_explained=shortfalls, found=found)
    by_id = {p.id: p for p in processes}
    coordinators = tuple(Coordinator(c.id, by_id[c.id].process_class, by_id[c.id].node,
                                     loc.prefixed(c.locality)) for c in chosen)
    if len(chosen) == count:
        _report_survival(mode, regions, coordinators, found)
    return CoordinatorPlan(name, mode, regions, count, limits, coordinators,
                           tuple((p.id, p.process_class, p.node) for p in processes), stanzas, tuple(found),
                           enforce_hard_limits)


def _region_datacenters(config: Mapping[str, Any], name: str) -> int:
    """Distinct ``id`` values of ``regions[].datacenters[]`` (``CountUniqueDataCenters``); 0 without regions."""
    ids: set[str] = set()
    for index, item in enumerate(m.sequence(config.get("regions"), "spec.databaseConfiguration.regions", name)):
        region = m.mapping(item, f"spec.databaseConfiguration.regions[{index}]", name)
        where = f"spec.databaseConfiguration.regions[{index}].datacenters"
        for position, entry in enumerate(m.sequence(region.get("datacenters"), where, name)):
            dc = m.mapping(entry, f"{where}[{position}]", name).get("id")
            if not isinstance(dc, str) or not dc:
                raise f.invalid("region-datacenter", f"{where}[{position}].id must be a non-empty string, got "
                                f"{dc!r:.40}", name)
            ids.add(dc)
    return len(ids)


def _selection(raw: Any, name: str) -> dict[str, int] | None:
    entries = m.sequence(raw, "spec.coordinatorSelection", name)
    if not entries:
        return None
    result: dict[str, int] = {}
    for index, item in enumerate(entries):
        entry = m.mapping(item, f"spec.coordinatorSelection[{index}]", name)
        cls = entry.get("processClass")
        if cls not in STATEFUL_CLASSES:
            raise f.invalid("coordinator-selection", f"spec.coordinatorSelection[{index}].processClass {cls!r} "
                            f"cannot hold coordinators; valid: {', '.join(STATEFUL_CLASSES)}", name)
        priority = entry.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise f.invalid("coordinator-selection", f"spec.coordinatorSelection[{index}].priority must be an "
                            f"integer, got {priority!r}", name)
        result[str(cls)] = priority
    return result


def _locality_specs(spec: Mapping[str, Any], mode: str, regions: int, name: str,
                    found: list[f.Finding]) -> list[loc.LocalitySpec]:
    specs = loc.parse_localities(spec.get("localities"), name)
    if not any(s.key == loc.ZONEID for s in specs):
        specs.insert(0, loc.LocalitySpec(loc.ZONEID, topology_key=loc.HOSTNAME))
        found.append(f.info("default-zoneid", f"no locality_zoneid declared: using node label {loc.HOSTNAME!r}, "
                            "the operator's default fault domain", name))
    required = [_SPLIT_KEY[mode]] if mode in _SPLIT_KEY else []
    if regions > 1:
        required.append(loc.DCID)
    for key in required:
        if not any(s.key == key for s in specs):
            raise f.invalid("locality-required", f"redundancy_mode {mode} (usable_regions {regions}) needs a "
                            f"{loc.PREFIX}{key} entry in spec.localities", name)
    return specs


def _classes(spec: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    counts = m.mapping(spec.get("processCounts"), "spec.processCounts")
    classes = [str(k) for k in counts if str(k) in STATEFUL_CLASSES]
    for item in manifest.get("processes") or []:
        if isinstance(item, Mapping) and item.get("processClass") in STATEFUL_CLASSES:
            classes.append(str(item["processClass"]))
    return sorted(set(classes))


def _processes(manifest: Mapping[str, Any], spec: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], *,
               stanzas: Mapping[str, Mapping[str, Any]], name: str, found: list[f.Finding]) -> list[loc.Process]:
    """The given processes, or ``processCounts`` pods placed by ``plan_spread`` under the stanzas."""
    if manifest.get("processes") is not None:
        return loc.parse_processes(manifest.get("processes"), name)
    counts = m.mapping(spec.get("processCounts"), "spec.processCounts", name)
    if not counts:
        raise f.invalid("no-processes", "give a top-level processes list or spec.processCounts", name)
    result: list[loc.Process] = []
    for cls in sorted(counts, key=str):
        count = m.positive_int(counts[cls], f"spec.processCounts.{cls}", name, minimum=0)
        if cls not in stanzas or count == 0:
            continue
        pod = {"metadata": {"name": f"{name}-{cls}", "labels": {CLUSTER_LABEL: name, CLASS_LABEL: cls}},
               "spec": {"topologySpreadConstraints": stanzas[cls]["topologySpreadConstraints"]}}
        try:
            placed = placement.plan_spread(pod, count, nodes)
        except errors.NotEnoughCandidates as exc:
            placed = [str(n) for n in exc.chosen]
            found.append(f.error("processes-unplaceable", f"only {len(placed)} of {count} {cls} pod(s) can be "
                                 f"placed: {exc}", name))
        result.extend(loc.Process(f"{cls}-{i}", cls, node) for i, node in enumerate(placed, start=1))
    return result


def _check_split(mode: str, candidates: Sequence[placement.Candidate], enforced: bool,
                 found: list[f.Finding]) -> bool:
    """Exactly three halls/DCs, each with three distinct zones; True when a shortfall was reported."""
    key = _SPLIT_KEY.get(mode)
    if key is None or not candidates:
        return False
    zones: dict[str, set[str]] = defaultdict(set)
    for c in candidates:
        zones[c.locality.get(key, "")].add(c.locality.get(loc.ZONEID, ""))
    if len(zones) != 3:
        found.append(f.error(f"{key}-count", f"{mode} needs exactly 3 distinct {loc.PREFIX}{key} values among the "
                             f"coordinator candidates, found {len(zones)}: {m.some(sorted(zones))}"))
        return True
    short = {value: sorted(z) for value, z in sorted(zones.items()) if len(z) < 3}
    if short:
        detail = "; ".join(f"{key} {v!r} has {len(z)} ({m.some(z)})" for v, z in short.items())
        message = (f"9 coordinators with zoneid limited to 1 and {key} to 3 need at least 3 distinct zoneid values "
                   f"in each of the 3 {key} values (9 distinct zones in all; 2 per {key} is not enough): {detail}")
        found.append(f.error("zones-per-split", message) if enforced else f.warning("zones-per-split", message))
        return enforced
    return False


def _choose(candidates: Sequence[placement.Candidate], count: int, mode: str, *, limits: Mapping[str, int] | None,
            already_explained: bool, found: list[f.Finding]) -> list[placement.Candidate]:
    split = _SPLIT_KEY.get(mode)
    fields = (split, loc.ZONEID) if split else (loc.ZONEID, loc.DCID)
    if limits and loc.DCID in limits and split != loc.DCID:
        fields = (loc.DCID, loc.ZONEID)
    try:
        chosen = placement.choose_distributed(candidates, count, fields=fields, hard_limits=limits)
    except errors.NotEnoughCandidates as exc:
        if not already_explained:
            found.append(f.error("not-enough-coordinators", f"{exc} (FoundationDB: 'Could only select "
                                 f"{len(exc.chosen)} processes, but {count} are required')"))
        return [c for c in exc.chosen if isinstance(c, placement.Candidate)]
    if limits is None:
        crowded = sorted(z for z, n in Counter(c.locality.get(loc.ZONEID, "") for c in chosen).items() if n > 1)
        if crowded:
            found.append(f.warning("coordinators-share-zone", f"without hard limits several coordinators share "
                                   f"zoneid {m.some(crowded)}; FoundationDB's operator would refuse this selection"))
    return chosen


def _report_survival(mode: str, regions: int, coordinators: Sequence[Coordinator], found: list[f.Finding]) -> None:
    key = _SPLIT_KEY.get(mode) or (loc.DCID if regions > 1 else loc.ZONEID)
    total = len(coordinators)
    quorum = total // 2 + 1
    per_value = Counter(c.localities.get(loc.PREFIX + key, "") for c in coordinators)
    worst_value, worst = max(per_value.items(), key=lambda item: (item[1], item[0]))
    left = total - worst
    text = (f"losing {key} {worst_value!r} (the worst case) leaves {left} of {total} coordinators; a majority "
            f"needs {quorum}")
    if left >= quorum:
        found.append(f.info("coordinator-survival", text))
    else:
        found.append(f.warning("coordinator-survival", text + ": the cluster would be unavailable"))
