"""The scenario file of ``cloudzones simulate``: format, validation, and expansion into concrete machines.

A scenario is YAML (see ``scenarios/default.yaml``)::

    name: str                      # optional
    region: eastus                 # required: the Azure location
    subscription: <uuid>           # optional; resourceGroup: optional
    nodes:                         # required, non-empty; each entry one of
      - {kind: vmss, scaleSet: NAME, count: N, zones: ["1","2","3"]}   # uniform scale set, zones round-robin
      - {kind: flex, scaleSet: NAME, count: N, zones: [...]}            # flexible scale set
      - {kind: vmss|flex, scaleSet: NAME, count: N, faultDomains: [0, 36]}  # unzoned (fault domains round-robin)
      - {kind: vm, name: NAME, zone: "2"} | {kind: vm, name: NAME, faultDomain: 1}   # standalone VM
    storageClasses: [StorageClass manifests]
    claims:                        # each: a claim or a StatefulSet's claims
      - {name: NAME, storageClass: SC, size: 10Gi, selectedNode: NODE?, expectError: bool?}
      - {statefulSet: NAME, template: data, replicas: N, storageClass: SC, size: 10Gi}
    staticVolumes:                 # PVs sent through the admission webhook
      - {name: NAME, disk: DISK, zone: "1"} | {name: NAME, nfs: {server: ..., path: ...}}
    workload: {name: NAME, replicas: N, replicationFactor: N, maxSkew: 1, topologyKey: KEY}   # optional

Every problem is reported with its place in the file (``nodes[2].zones``) and the offending value.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import pathlib
from collections.abc import Mapping
from typing import Any

from cloudzones import documents, errors, labels
from cloudzones.topology import normalize_region, parse_zone_id
from providers.azure import resource_ids


class ScenarioError(errors.ConfigError):
    """The scenario file is not valid; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class Machine:
    """One VM of the emulated cloud, and the node it becomes."""

    node: str
    """Node name (the computer name, lower case)."""
    kind: str
    """``vmss``, ``flex`` or ``vm``."""
    group: str
    """Scale set name, or the VM name for standalone VMs."""
    zone: str | None
    fault_domain: int
    instance: int = 0


@dataclasses.dataclass(frozen=True)
class Claim:
    """One PersistentVolumeClaim to provision."""

    name: str
    storage_class: str
    size: str
    selected_node: str | None = None
    statefulset: str | None = None
    ordinal: int | None = None
    expect_error: bool = False


@dataclasses.dataclass(frozen=True)
class Workload:
    """A replicated workload to plan with the placement core."""

    name: str
    replicas: int
    replication_factor: int
    max_skew: int
    topology_key: str


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A validated scenario."""

    name: str
    region: str
    subscription: str
    resource_group: str
    machines: tuple[Machine, ...]
    storage_classes: tuple[Mapping[str, Any], ...]
    claims: tuple[Claim, ...]
    static_volumes: tuple[Mapping[str, Any], ...]
    workload: Workload | None


def _fail(where: str, message: str) -> ScenarioError:
    return ScenarioError(f"scenario {where}: {message}")


MAX_NODES = 2_000
"""Nodes a scenario may emulate (all of them are served by loopback fakes in this one process)."""
AZURE_ZONES = 3
"""Every Azure region with availability zones has three (ids 1-3)."""


def _int(entry: Mapping[str, Any], key: str, where: str, *, minimum: int = 0, default: int | None = None,
         maximum: int | None = None) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(f"{where}.{key}", f"must be an integer >= {minimum}, got {value!r:.40}")
    if maximum is not None and value > maximum:
        raise _fail(f"{where}.{key}", f"is {value!r:.40}, more than the {maximum:,} a simulation emulates")
    return value


def _str(entry: Mapping[str, Any], key: str, where: str, *, default: str | None = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise _fail(f"{where}.{key}", f"must be a non-empty string, got {value!r}")
    return value.strip()


def _zone(value: object, where: str) -> str:
    try:
        zone = parse_zone_id(value if isinstance(value, (int, str)) else repr(value))
    except errors.InvalidZone as exc:
        raise _fail(where, f"{exc}") from exc
    if not 1 <= zone <= AZURE_ZONES:
        raise _fail(where, f"zone {value!r} does not exist: Azure regions have zones 1 to {AZURE_ZONES}")
    return str(zone)


def _machines(entries: object) -> tuple[Machine, ...]:
    if not isinstance(entries, list) or not entries:
        raise _fail("nodes", f"must be a non-empty list, got {entries!r}")
    machines: list[Machine] = []
    for index, entry in enumerate(entries):
        where = f"nodes[{index}]"
        if not isinstance(entry, Mapping):
            raise _fail(where, f"must be a mapping, got {entry!r}")
        kind = entry.get("kind")
        if kind not in ("vmss", "flex", "vm"):
            raise _fail(f"{where}.kind", f"must be vmss, flex or vm, got {kind!r}")
        zones = entry.get("zones", [])
        fds = entry.get("faultDomains", [])
        if kind == "vm":
            name = _str(entry, "name", where).lower()
            if "zone" in entry and "faultDomain" in entry:
                raise _fail(where, "give either zone or faultDomain, not both")
            zone = _zone(entry["zone"], f"{where}.zone") if "zone" in entry else None
            machines.append(Machine(name, "vm", name, zone, _int(entry, "faultDomain", where, default=0,
                                                                 maximum=999)))
            if len(machines) > MAX_NODES:
                raise _fail("nodes", f"more than the {MAX_NODES:,} nodes a simulation emulates")
            continue
        group = _str(entry, "scaleSet", where).lower()
        count = _int(entry, "count", where, minimum=1, maximum=MAX_NODES - len(machines))
        if not isinstance(zones, list) or not isinstance(fds, list) or bool(zones) == bool(fds):
            raise _fail(where, f"give exactly one of zones or faultDomains as a non-empty list, got zones={zones!r}"
                        f" faultDomains={fds!r}")
        for i in range(count):
            zone = _zone(zones[i % len(zones)], f"{where}.zones") if zones else None
            fault_domain = 0 if zones else _int({"fd": fds[i % len(fds)]}, "fd", f"{where}.faultDomains",
                                                maximum=999)
            node = resource_ids.vmss_computer_name(group, i) if kind == "vmss" else f"{group}-{i}"
            machines.append(Machine(node, kind, group, zone, fault_domain, i))
    names = [m.node for m in machines]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _fail("nodes", f"node names repeat: {duplicates}")
    return tuple(machines)


def _claims(entries: object, classes: set[str], nodes: set[str]) -> tuple[Claim, ...]:
    if not isinstance(entries, list):
        raise _fail("claims", f"must be a list, got {entries!r}")
    claims: list[Claim] = []
    for index, entry in enumerate(entries):
        where = f"claims[{index}]"
        if not isinstance(entry, Mapping):
            raise _fail(where, f"must be a mapping, got {entry!r}")
        storage_class = _str(entry, "storageClass", where)
        if storage_class not in classes:
            raise _fail(f"{where}.storageClass", f"no StorageClass named {storage_class!r} (have {sorted(classes)})")
        size = str(entry.get("size", "10Gi"))
        selected = entry.get("selectedNode")
        if selected is not None and str(selected).lower() not in nodes:
            raise _fail(f"{where}.selectedNode", f"no node named {selected!r}")
        expect = bool(entry.get("expectError", False))
        if "statefulSet" in entry:
            sts, template = _str(entry, "statefulSet", where), _str(entry, "template", where, default="data")
            for ordinal in range(_int(entry, "replicas", where, minimum=1)):
                claims.append(Claim(f"{template}-{sts}-{ordinal}", storage_class, size, None, sts, ordinal, expect))
        else:
            claims.append(Claim(_str(entry, "name", where), storage_class, size,
                                str(selected).lower() if selected else None, expect_error=expect))
    return tuple(claims)


def _workload(entry: object) -> Workload | None:
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise _fail("workload", f"must be a mapping, got {entry!r}")
    return Workload(_str(entry, "name", "workload"), _int(entry, "replicas", "workload", minimum=1),
                    _int(entry, "replicationFactor", "workload", minimum=1, default=3),
                    _int(entry, "maxSkew", "workload", minimum=1, default=1),
                    _str(entry, "topologyKey", "workload", default=labels.ZONE))


def parse(data: object) -> Scenario:
    """Validate parsed YAML into a `Scenario`."""
    if not isinstance(data, Mapping):
        raise _fail("file", f"must be a mapping at the top level, got {type(data).__name__}")
    known = {"name", "region", "subscription", "resourceGroup", "nodes", "storageClasses", "claims",
             "staticVolumes", "workload"}
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise _fail("file", f"unknown keys {unknown}; expected some of {sorted(known)}")
    region = normalize_region(_str(data, "region", "file"))
    machines = _machines(data.get("nodes"))
    classes_raw = data.get("storageClasses") or []
    if not isinstance(classes_raw, list) or not all(isinstance(c, Mapping) for c in classes_raw):
        raise _fail("storageClasses", "must be a list of StorageClass manifests")
    classes = tuple({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", **c} for c in classes_raw)
    names = {str((c.get("metadata") or {}).get("name") or "") for c in classes}
    if "" in names:
        raise _fail("storageClasses", "every StorageClass needs metadata.name")
    static = data.get("staticVolumes") or []
    if not isinstance(static, list) or not all(isinstance(v, Mapping) and v.get("name") for v in static):
        raise _fail("staticVolumes", "must be a list of mappings with a name")
    return Scenario(
        name=str(data.get("name") or "scenario"), region=region,
        subscription=str(data.get("subscription") or "00000000-0000-0000-0000-000000000000"),
        resource_group=str(data.get("resourceGroup") or "cloudzones-sim").lower(),
        machines=machines, storage_classes=classes,
        claims=_claims(data.get("claims") or [], names, {m.node for m in machines}),
        static_volumes=tuple(static), workload=_workload(data.get("workload")))


def load(path: str | pathlib.Path | None = None) -> Scenario:
    """Read and validate a scenario file (the bundled default when ``path`` is None)."""
    if path is None:
        text = importlib.resources.files("cloudzones.simulation").joinpath("scenarios/default.yaml").read_text()
        found = documents.parse(text, source="scenario (bundled)")
    else:
        found = documents.load_all(path, what="scenario")
    if len(found) != 1:
        raise ScenarioError(f"scenario {path}: expected one document, found {len(found)}")
    return parse(found[0])
