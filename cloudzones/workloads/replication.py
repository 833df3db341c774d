"""Zone-aware replication for a Loki stack (the Loki operator design), validated and planned before deploying.

Input: a ``LokiStack`` manifest (``spec.replication: {factor, zones: [{topologyKey, maxSkew}]}``, the
deprecated ``spec.replicationFactor``, ``spec.size``, ``spec.template.<component>.replicas``) and the
cluster's Node manifests. Checks, stricter than the operator (which only reports some of them as
status conditions once pods are Pending): every topologyKey is set on every schedulable node;
``factor > zones`` is an error (the operator declares ``ErrReplicationFactorToZonesRatio`` but never
uses it); ``factor == zones`` is a warning. Zones are the distinct values of the topology keys joined
with ``_``, the way the operator builds ``INSTANCE_AVAILABILITY_ZONE``. Then, with ``plan_spread``,
where each component's replicas would go and whether a rollout gets stuck, now or when one zone
becomes unavailable while its nodes stay listed (NotReady, cordoned or full: under the default
``nodeTaintsPolicy: Ignore`` such a zone still counts, with 0 pods, so maxSkew holds the others back).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones import errors, labels, placement, shapes
from cloudzones.workloads import _manifests as m
from cloudzones.workloads import findings as f
from cloudzones.workloads import zoneinject

COMPONENT_LABEL = "app.kubernetes.io/component"
INSTANCE_LABEL = "app.kubernetes.io/instance"
HOSTNAME = "kubernetes.io/hostname"
SEPARATOR = "_"
#: ``spec.template`` key → the ``app.kubernetes.io/component`` value the operator gives its pods.
COMPONENTS: Mapping[str, str] = {
    "compactor": "compactor", "distributor": "distributor", "ingester": "ingester", "querier": "querier",
    "queryFrontend": "query-frontend", "gateway": "lokistack-gateway", "indexGateway": "index-gateway",
    "ruler": "ruler"}
#: size → (default replication factor, ingester replicas), from the operator's internal/manifests/internal/sizes.go.
SIZE_DEFAULTS: Mapping[str, tuple[int, int]] = {
    "1x.demo": (1, 1), "1x.pico": (2, 3), "1x.extra-small": (2, 3), "1x.small": (2, 3), "1x.medium": (2, 3)}
_WHAT_IF_MAX_DOMAINS = 32
_UNAVAILABLE_TAINT = {"key": "cloudzones.io/what-if-unavailable", "effect": "NoSchedule"}


@dataclasses.dataclass(frozen=True)
class ZoneSpec:
    """One ``spec.replication.zones`` entry."""

    topology_key: str
    max_skew: int = 1


@dataclasses.dataclass(frozen=True)
class Component:
    """One component to place: its template key, replicas and node placement options."""

    name: str
    replicas: int
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """The ``app.kubernetes.io/component`` value."""
        return COMPONENTS[self.name]


@dataclasses.dataclass(frozen=True)
class ReplicationSpec:
    """A parsed, well-formed LokiStack replication spec."""

    name: str
    namespace: str
    factor: int
    zones: tuple[ZoneSpec, ...]
    components: tuple[Component, ...]

    @property
    def topology_keys(self) -> tuple[str, ...]:
        """The zones' topology keys, in order."""
        return tuple(z.topology_key for z in self.zones)


@dataclasses.dataclass(frozen=True)
class ComponentPlan:
    """Where one component's replicas go and whether that can get stuck."""

    name: str
    replicas: int
    topology_spread_constraints: tuple[Mapping[str, Any], ...]
    nodes: tuple[str, ...]
    """Node per placed replica (fewer than ``replicas`` when stuck)."""
    zones: tuple[str, ...]
    """The zone value (keys joined with ``_``) of each placed replica."""
    stuck: bool = False
    reason: str = ""
    stuck_if_unavailable: tuple[tuple[str, int], ...] = ()
    """(zone value, replicas still placeable) for each zone whose unavailability stalls the rollout."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return f.json_dict({"name": self.name, "replicas": self.replicas, "nodes": self.nodes, "zones": self.zones,
                           "stuck": self.stuck, "reason": self.reason,
                           "topologySpreadConstraints": [dict(c) for c in self.topology_spread_constraints],
                           "stuckIfUnavailable": [{"zone": z, "placeable": n} for z, n in self.stuck_if_unavailable]})


@dataclasses.dataclass(frozen=True)
class ReplicationPlan:
    """The validated plan for one LokiStack."""

    name: str
    factor: int
    topology_keys: tuple[str, ...]
    zones: tuple[str, ...]
    """Distinct zone values over the schedulable nodes carrying every key."""
    tolerance: placement.FailureReport | None
    """Zone-failure tolerance with one replica per zone (None without zone awareness or zones)."""
    components: tuple[ComponentPlan, ...]
    findings: tuple[f.Finding, ...]
    zone_injection: zoneinject.ZoneInjection | None = None

    @property
    def ok(self) -> bool:
        """No error findings."""
        return not f.has_errors(self.findings)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        tolerance = None
        if self.tolerance is not None:
            tolerance = {"writeZoneFailures": self.tolerance.write_zone_failures,
                         "readZoneFailures": self.tolerance.read_zone_failures, "quorum": self.tolerance.quorum,
                         "replicasPerKey": self.tolerance.replicas_per_key}
        return f.json_dict({
            "kind": "ReplicationPlan", "name": self.name, "factor": self.factor, "topologyKeys": self.topology_keys,
            "zones": self.zones, "tolerance": tolerance, "components": [c.as_dict() for c in self.components],
            "zoneInjection": self.zone_injection.as_dict() if self.zone_injection else None,
            "findings": f.as_dicts(self.findings), "ok": self.ok})


def zone_value(node_labels: Mapping[str, str], keys: Sequence[str]) -> str:
    """The node's zone as the Loki ring sees it: the label values of ``keys`` joined with ``_``."""
    return SEPARATOR.join(node_labels.get(key, "") for key in keys)


def spread_constraints(spec: ReplicationSpec, component: Component) -> list[dict[str, Any]]:
    """The component's ``topologySpreadConstraints``: one DoNotSchedule entry per zone, selecting its pods."""
    selector = {"matchLabels": {COMPONENT_LABEL: component.label, INSTANCE_LABEL: spec.name}}
    return [{"maxSkew": z.max_skew, "topologyKey": z.topology_key, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector} for z in spec.zones]


def parse_spec(manifest: Mapping[str, Any]) -> tuple[ReplicationSpec, list[f.Finding]]:
    """The spec and its warnings/notes; `InvalidWorkloadSpec` listing every malformed field."""
    found: list[f.Finding] = []
    name = m.name_of(manifest) or "lokistack"
    spec = _collect(found, lambda: m.mapping(manifest.get("spec", manifest), "spec", name)) or {}
    factor = _factor(spec, name, found)
    zones: list[ZoneSpec] = []
    replication = _collect(found, lambda: m.mapping(spec.get("replication"), "spec.replication", name)) or {}
    for index, raw in enumerate(_collect(found, lambda: m.sequence(replication.get("zones"),
                                                                     "spec.replication.zones", name)) or []):
        zone = _collect(found, lambda i=index, r=raw: _zone(r, i, name))
        if zone is None:
            continue
        if any(z.topology_key == zone.topology_key for z in zones):
            found.append(f.error("zone-duplicate-key", f"spec.replication.zones lists topologyKey "
                                 f"{zone.topology_key!r} twice", name))
            continue
        zones.append(zone)
    components = _components(spec, name, factor, found)
    f.raise_for_errors(found, f"LokiStack {name!r}")
    return ReplicationSpec(name, m.namespace_of(manifest), factor or 1, tuple(zones), tuple(components)), found


def plan(manifest: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], *, zone_injection: bool = False,
         image: str = zoneinject.DEFAULT_IMAGE) -> ReplicationPlan:
    """Validate the LokiStack against ``nodes`` and place every component; findings say what is wrong.

    Raises `InvalidWorkloadSpec` only for a malformed manifest; broken rules become error findings.
    """
    m.shaped(manifest, shapes.LOKI_STACK, subject=m.name_of(manifest) if isinstance(manifest, Mapping) else "")
    m.shaped(list(nodes), shapes.ListOf(shapes.NODE), "nodes")
    spec, found = parse_spec(manifest)
    m.node_names(nodes)
    keys = spec.topology_keys
    zones: tuple[str, ...] = ()
    tolerance = None
    if not nodes:
        found.append(f.error("no-nodes", "no nodes were given, so nothing can be checked or placed"))
    if not keys:
        found.append(f.info("zone-awareness-off", "spec.replication.zones is empty: replicas are not spread "
                            "over zones, so one zone loss may take every replica of a key"))
    elif nodes:
        zones = _check_zones(spec, nodes, found)
        if zones:
            tolerance = placement.failure_report(dict.fromkeys(zones, 1), spec.factor)
            found.append(f.info("tolerance", f"with one replica per zone over {len(zones)} zone(s), writes "
                                f"survive {tolerance.write_zone_failures} zone loss(es) and reads "
                                f"{tolerance.read_zone_failures} (quorum {tolerance.quorum} of "
                                f"{tolerance.replicas_per_key} replica(s) per key)"))
    component_plans = [_plan_component(spec, c, nodes, found) for c in spec.components] if nodes else []
    injection = None
    if zone_injection and keys:
        injection = zoneinject.zone_injection(keys, image=image)
        found.append(f.info("zone-injection", "the pod zone annotator must copy node label(s) "
                            f"{m.some(list(keys))} onto the pods (one annotation per key, named like the "
                            "label); the gateway needs no init container"))
    return ReplicationPlan(spec.name, spec.factor, keys, zones, tolerance, tuple(component_plans), tuple(found),
                           injection)


def _collect(found: list[f.Finding], thunk: Any) -> Any:
    """Run ``thunk``; turn an `InvalidWorkloadSpec` into findings and return None."""
    try:
        return thunk()
    except errors.InvalidWorkloadSpec as exc:
        found.extend(exc.findings)
        return None


def _factor(spec: Mapping[str, Any], name: str, found: list[f.Finding]) -> int | None:
    replication = spec.get("replication")
    new = replication.get("factor") if isinstance(replication, Mapping) else None
    old = spec.get("replicationFactor")
    factor = _collect(found, lambda: m.positive_int(new, "spec.replication.factor", name, rule="factor-invalid")
                      if new not in (None, 0) else None)
    deprecated = _collect(found, lambda: m.positive_int(old, "spec.replicationFactor", name, rule="factor-invalid")
                          if old not in (None, 0) else None)
    # The webhook refuses any spec.replication block next to replicationFactor > 0, factor set or not.
    if replication is not None and deprecated is not None:
        found.append(f.error("replication-conflict", "spec.replication and the deprecated spec.replicationFactor "
                             "cannot be used at the same time (the Loki operator's webhook refuses it)", name))
        return int(factor if factor is not None else deprecated)
    if deprecated is not None:
        found.append(f.warning("deprecated-replication-factor", f"spec.replicationFactor ({deprecated}) is "
                               "deprecated: use spec.replication.factor (and spec.replication.zones)", name))
        return int(deprecated)
    if factor is not None:
        return int(factor)
    size = spec.get("size")
    if isinstance(size, str) and size in SIZE_DEFAULTS:
        found.append(f.info("default-factor", f"no replication factor given: size {size} defaults to "
                            f"{SIZE_DEFAULTS[size][0]}", name))
        return SIZE_DEFAULTS[size][0]
    if new is None and old is None:
        found.append(f.error("factor-missing", "no replication factor: set spec.replication.factor "
                             f"(or a known spec.size: {', '.join(SIZE_DEFAULTS)})", name))
    return None


def _zone(raw: Any, index: int, name: str) -> ZoneSpec:
    where = f"spec.replication.zones[{index}]"
    entry = m.mapping(raw, where, name)
    key = entry.get("topologyKey")
    if not isinstance(key, str) or not key.strip():
        raise f.invalid("zone-topology-key", f"{where}.topologyKey must be a non-empty string, got {key!r}", name)
    skew = entry.get("maxSkew")
    max_skew = 1 if skew is None else m.positive_int(skew, f"{where}.maxSkew", name, rule="zone-max-skew")
    return ZoneSpec(key, max_skew)


def _components(spec: Mapping[str, Any], name: str, factor: int | None,
                found: list[f.Finding]) -> list[Component]:
    template = _collect(found, lambda: m.mapping(spec.get("template"), "spec.template", name)) or {}
    result: list[Component] = []
    # In COMPONENTS' order, not the manifest's: the API server stores map keys sorted, a file keeps them as
    # written, and the same LokiStack must plan the same either way (found against the real API server).
    rank = {name: index for index, name in enumerate(COMPONENTS)}
    for key, raw in sorted(template.items(), key=lambda item: (rank.get(str(item[0]), len(rank)), str(item[0]))):
        if key not in COMPONENTS:
            found.append(f.error("unknown-component", f"spec.template.{key} is not a Loki component; valid: "
                                 f"{', '.join(COMPONENTS)}", name))
            continue
        component = _collect(found, lambda k=key, r=raw: _component(k, r, name))
        if component is not None and component.replicas > 0:
            result.append(component)
    if not any(c.name == "ingester" for c in result) and "ingester" not in template and factor is not None:
        size = spec.get("size")
        replicas = SIZE_DEFAULTS[size][1] if isinstance(size, str) and size in SIZE_DEFAULTS else factor
        source = f"size {size}" if isinstance(size, str) and size in SIZE_DEFAULTS else "the replication factor"
        found.append(f.info("default-ingester-replicas", f"spec.template.ingester.replicas not given: planning "
                            f"{replicas} ingester(s), from {source}", name))
        result.insert(0, Component("ingester", replicas))
    for component in result:
        if component.name == "ingester" and factor is not None and component.replicas <= factor:
            found.append(f.warning("ingester-replicas", f"{component.replicas} ingester replica(s) for replication "
                                   f"factor {factor}: ingestion stops whenever an ingester restarts (Loki's "
                                   "InsufficientIngesterReplicas)", name))
    return result


def _component(key: str, raw: Any, name: str) -> Component:
    where = f"spec.template.{key}"
    entry = m.mapping(raw, where, name)
    replicas = m.positive_int(entry.get("replicas", 1), f"{where}.replicas", name, rule="replicas-invalid", minimum=0)
    selector = m.mapping(entry.get("nodeSelector"), f"{where}.nodeSelector", name)
    tolerations = m.sequence(entry.get("tolerations"), f"{where}.tolerations", name)
    return Component(key, replicas, {str(k): str(v) for k, v in selector.items()},
                     tuple(t for t in tolerations if isinstance(t, Mapping)))


def _check_zones(spec: ReplicationSpec, nodes: Sequence[Mapping[str, Any]], found: list[f.Finding]) -> tuple[str, ...]:
    """Key presence on schedulable nodes, then factor against the zone count; the zones."""
    keys = spec.topology_keys
    usable = [n for n in nodes if m.schedulable(n)]
    if not usable:
        found.append(f.error("no-schedulable-nodes", f"none of the {len(nodes)} node(s) is schedulable "
                             "(all cordoned or tainted NoSchedule/NoExecute)"))
        return ()
    for key in keys:
        lacking = [m.name_of(n) for n in usable if not m.labels_of(n).get(key)]
        if lacking:
            found.append(f.error("topology-key-missing", f"{len(lacking)} of {len(usable)} schedulable node(s) lack "
                                 f"topology key {key!r} (or have it empty): {m.some(lacking)}; DoNotSchedule never "
                                 "places a replica there and the zone annotation could not be written", key))
    zones = tuple(sorted({zone_value(m.labels_of(n), keys) for n in usable
                          if all(m.labels_of(n).get(k) for k in keys)}))
    where = f"{len(zones)} zone(s) ({m.some(list(zones))})"
    if not zones:
        return ()
    if spec.factor > len(zones):
        found.append(f.error("factor-exceeds-zones", f"replication factor {spec.factor} is greater than the "
                             f"{where}: each key gets only {len(zones)} replica(s) (the Loki operator declares "
                             "this error, ErrReplicationFactorToZonesRatio, but never raises it)", spec.name))
    elif spec.factor == len(zones) and spec.factor > 1:
        found.append(f.warning("no-spare-zone", f"replication factor {spec.factor} equals the {where}: losing one "
                               "zone leaves writes without headroom and the lost replicas have no zone to be "
                               f"rebuilt in; {spec.factor + 1} zones are recommended", spec.name))
    return zones


def _pod(spec: ReplicationSpec, component: Component) -> dict[str, Any]:
    constraints = spread_constraints(spec, component)
    # Stands in for the operator's preferred hostname anti-affinity, so replicas spread over nodes too.
    if all(z.topology_key != HOSTNAME for z in spec.zones):
        constraints.append({"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": constraints[0]["labelSelector"] if constraints else
                            {"matchLabels": {COMPONENT_LABEL: component.label, INSTANCE_LABEL: spec.name}}})
    pod_spec: dict[str, Any] = {"topologySpreadConstraints": constraints}
    if component.node_selector:
        pod_spec["nodeSelector"] = dict(component.node_selector)
    if component.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in component.tolerations]
    return {"metadata": {"name": f"{spec.name}-{component.label}", "namespace": spec.namespace,
                         "labels": {COMPONENT_LABEL: component.label, INSTANCE_LABEL: spec.name}},
            "spec": pod_spec}


def _plan_component(spec: ReplicationSpec, component: Component, nodes: Sequence[Mapping[str, Any]],
                    found: list[f.Finding]) -> ComponentPlan:
    pod = _pod(spec, component)
    by_name = {m.name_of(n): m.labels_of(n) for n in nodes}
    keys = spec.topology_keys or (labels.ZONE,)
    constraints = tuple(spread_constraints(spec, component))
    try:
        chosen = placement.plan_spread(pod, component.replicas, nodes)
    except errors.NotEnoughCandidates as exc:
        chosen = [str(n) for n in exc.chosen]
        found.append(f.error("rollout-stuck", f"only {len(chosen)} of {component.replicas} replica(s) can be "
                             f"placed, the rest would stay Pending: {exc}", component.name))
        return ComponentPlan(component.name, component.replicas, constraints, tuple(chosen),
                             tuple(zone_value(by_name[n], keys) for n in chosen), True, str(exc))
    stalls = _what_if_unavailable(spec, component, pod, nodes)
    for placeable in sorted({n for _, n in stalls}):
        which = [z for z, n in stalls if n == placeable]
        found.append(f.warning("stuck-if-zone-unavailable", f"if zone {' or '.join(repr(z) for z in which)} "
                               "becomes unavailable while its nodes stay listed (NotReady, cordoned or full), only "
                               f"{placeable} of {component.replicas} replica(s) can be placed: the empty zone still "
                               "counts for maxSkew, so a rollout or a rescheduled pod waits until the zone returns "
                               "or its nodes are removed", component.name))
    return ComponentPlan(component.name, component.replicas, constraints, tuple(chosen),
                         tuple(zone_value(by_name[n], keys) for n in chosen), stuck_if_unavailable=tuple(stalls))


def _what_if_unavailable(spec: ReplicationSpec, component: Component, pod: Mapping[str, Any],
                         nodes: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """(zone, replicas placeable) for each zone of the first key whose nodes, made unusable, stall placement."""
    if not spec.zones:
        return []
    key = spec.zones[0].topology_key
    values = sorted({m.labels_of(n)[key] for n in nodes if m.labels_of(n).get(key)})
    if len(values) < 2 or len(values) > _WHAT_IF_MAX_DOMAINS:
        return []
    stalls = []
    for value in values:
        changed = [_tainted(n) if m.labels_of(n).get(key) == value else n for n in nodes]
        try:
            placement.plan_spread(pod, component.replicas, changed)
        except errors.NotEnoughCandidates as exc:
            stalls.append((value, len(exc.chosen)))
    return stalls


def _tainted(node: Mapping[str, Any]) -> dict[str, Any]:
    spec = dict(node.get("spec") or {})
    spec["taints"] = [*(spec.get("taints") or []), _UNAVAILABLE_TAINT]
    return {**node, "spec": spec}
