"""Shapes of the manifests cloudzones reads, checked at the boundary (pure).

A wrong type is one line: ``items[2].metadata.labels: expected a mapping, got a list``.

Why our own forty lines rather than a library's typed models: the Kubernetes client's models (pydantic
since v37) validate whole objects and refuse fields from newer API versions, while we read a handful of
fields from nodes, pods, claims, volumes, StorageClasses and custom resources that have no published
models; jsonschema would need the OpenAPI documents we do not ship. A schema here lists only the fields
some code of ours reads, with their expected type; anything else is ignored, ``null`` counts as absent
(as the API server treats it), and a wrong type is reported once, with its path, before any planner runs.

Schema language: a Python type (``str``, ``int``, ``bool``, `NUMBER`, `QUANTITY`), `ANY`, a dict of field
schemas (the value must be a mapping), `MapOf(schema)` (a mapping with string keys) and `ListOf(schema)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from cloudzones import errors

NUMBER = (int, float)
QUANTITY = (str, int, float)
"""A Kubernetes resource quantity: ``"100Mi"``, ``2``, ``0.5``."""


@dataclasses.dataclass(frozen=True)
class MapOf:
    """A mapping with string keys whose values all have one shape."""

    value: Schema


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list whose items all have one shape."""

    item: Schema


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()
Schema = type | tuple[type, ...] | dict[str, Any] | MapOf | ListOf | _Any


class ShapeError(errors.ConfigError):
    """A manifest field has the wrong type; ``path`` says where (``items[2].metadata.labels``)."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


def describe(value: object) -> str:
    """``a string``, ``a list``, ``a mapping``, ``a number``... for messages."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def describe_kind(item: Mapping[str, Any]) -> str:
    """A manifest's kind for messages."""
    kind = item.get("kind")
    return str(kind) if isinstance(kind, str) and kind else "manifest without a kind"


_NAMES = {str: "a string", int: "a whole number", bool: "true or false", float: "a number"}


def _expected(schema: Schema) -> str:
    if isinstance(schema, (dict, MapOf)):
        return "a mapping"
    if isinstance(schema, ListOf):
        return "a list"
    if schema == NUMBER:
        return "a number"
    if schema == QUANTITY:
        return "a quantity (a string or a number)"
    if isinstance(schema, type):
        return _NAMES.get(schema, schema.__name__)
    return "something else"


def _fits(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # True is an int to Python, never to a manifest.
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


def check(value: Any, schema: Schema, path: str = "") -> None:
    """Raise `ShapeError` at the first field of ``value`` that does not have its shape in ``schema``."""
    # Paths are kept as (parent, piece) pairs and written out only for the error: a 150,000-pod
    # snapshot has millions of fields, and formatting each one's path cost more than checking it.
    stack: list[tuple[Any, Schema, Any]] = [(value, schema, path)]
    while stack:
        current, shape, where = stack.pop()
        if current is None or isinstance(shape, _Any):
            continue
        if isinstance(shape, dict):
            if not _is_map(current):
                _fail(where, shape, current)
            for field in sorted(shape, reverse=True):  # popped in order: the first wrong field is reported
                if field in current:
                    item, kind = current[field], shape[field]
                    # Scalars are checked later, in order, unless they plainly fit (most do): fewer pushes.
                    if item is None or (type(kind) is type and type(item) is kind):
                        continue
                    stack.append((item, kind, (where, field)))
        elif isinstance(shape, MapOf):
            if not _is_map(current):
                _fail(where, shape, current)
            for key in sorted(current, key=str, reverse=True):
                if not isinstance(key, str):
                    at = _render(where)
                    raise ShapeError(f"{at}: keys must be strings, got {describe(key)} {key!r:.40}", path=at)
                if current[key] is None and not isinstance(shape.value, _Any):
                    _fail((where, key), shape.value, None)
                stack.append((current[key], shape.value, (where, key)))
        elif isinstance(shape, ListOf):
            if type(current) is not list:
                _fail(where, shape, current)
            for index, item in enumerate(current):
                # null means "absent" for a field, but an absent list item is no item at all.
                if item is None and not isinstance(shape.item, _Any):
                    _fail((where, index), shape.item, item)
            stack.extend((item, shape.item, (where, i)) for i, item in reversed(list(enumerate(current))))
        elif not _fits(current, shape):
            _fail(where, shape, current)


def deeper_than(document: Any, limit: int) -> bool:
    """Whether ``document`` nests containers more than ``limit`` levels deep (``[[1]]`` is two levels)."""
    # Level by level over containers only (a 150,000-pod snapshot has millions of scalars); a value at
    # level limit + 1 exists exactly when a container at level limit is not empty.
    level = [document] if isinstance(document, (dict, list)) else []
    for depth in range(1, limit + 1):
        if not level:
            return False
        if depth == limit:
            return any(level)
        deeper: list[Any] = []
        for value in level:
            children = value.values() if type(value) is dict else value
            deeper.extend(child for child in children if type(child) is dict or type(child) is list)
        level = deeper
    return False


def _is_map(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def _render(where: Any) -> str:
    """A path kept as nested (parent, field name or list index) pairs, written out: ``spec.containers[0].name``."""
    pieces: list[str | int] = []
    while isinstance(where, tuple):
        where, piece = where
        pieces.append(piece)
    text = str(where)
    for piece in reversed(pieces):
        text = f"{text}[{piece}]" if isinstance(piece, int) else (f"{text}.{piece}" if text else str(piece))
    return text


def _fail(where: Any, shape: Schema, value: Any) -> None:
    at = _render(where)
    raise ShapeError(f"{at or 'document'}: expected {_expected(shape)}, got {describe(value)}", path=at)


LABEL_SELECTOR: dict[str, Any] = {
    "matchLabels": MapOf(str),
    "matchExpressions": ListOf({"key": str, "operator": str, "values": ListOf(str)}),
}
NODE_SELECTOR_TERMS = ListOf({"matchExpressions": ListOf({"key": str, "operator": str, "values": ListOf(str)}),
                              "matchFields": ListOf({"key": str, "operator": str, "values": ListOf(str)})})
METADATA: dict[str, Any] = {
    "name": str, "generateName": str, "namespace": str, "uid": str, "labels": MapOf(str),
    "annotations": MapOf(str), "deletionTimestamp": str,
    "ownerReferences": ListOf({"kind": str, "name": str, "uid": str, "controller": bool}),
}
TAINTS = ListOf({"key": str, "value": str, "effect": str})
NODE: dict[str, Any] = {
    "kind": str, "metadata": METADATA,
    "spec": {"providerID": str, "unschedulable": bool, "taints": TAINTS},
    "status": {"conditions": ListOf({"type": str, "status": str}), "allocatable": MapOf(QUANTITY),
               "capacity": MapOf(QUANTITY), "addresses": ListOf({"type": str, "address": str})},
}
POD_SPEC: dict[str, Any] = {
    "nodeName": str, "nodeSelector": MapOf(str),
    "tolerations": ListOf({"key": str, "operator": str, "value": str, "effect": str}),
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": NODE_SELECTOR_TERMS}}},
    "topologySpreadConstraints": ListOf({
        "maxSkew": int, "minDomains": int, "topologyKey": str, "whenUnsatisfiable": str,
        "labelSelector": LABEL_SELECTOR, "matchLabelKeys": ListOf(str), "nodeAffinityPolicy": str,
        "nodeTaintsPolicy": str}),
    "volumes": ListOf({"name": str, "persistentVolumeClaim": {"claimName": str}}),
    "containers": ListOf({"name": str, "resources": {"requests": MapOf(QUANTITY), "limits": MapOf(QUANTITY)},
                          "env": ListOf({"name": str, "value": str})}),
}
POD: dict[str, Any] = {"kind": str, "metadata": METADATA, "spec": POD_SPEC,
                       "status": {"phase": str, "podIP": str, "conditions": ListOf({"type": str, "status": str})}}
PVC: dict[str, Any] = {
    "kind": str, "metadata": METADATA,
    "spec": {"storageClassName": str, "volumeName": str, "accessModes": ListOf(str), "volumeMode": str,
             "resources": {"requests": MapOf(QUANTITY)}},
}
PV: dict[str, Any] = {
    "kind": str, "metadata": METADATA,
    "spec": {"storageClassName": str, "persistentVolumeReclaimPolicy": str, "mountOptions": ListOf(str),
             "claimRef": {"name": str, "namespace": str, "uid": str},
             "nodeAffinity": {"required": {"nodeSelectorTerms": NODE_SELECTOR_TERMS}},
             "azureDisk": {"diskURI": str, "diskName": str, "kind": str},
             "csi": {"driver": str, "volumeHandle": str}},
}
STORAGE_CLASS: dict[str, Any] = {
    "kind": str, "metadata": METADATA, "provisioner": str, "parameters": MapOf((str, int, float, bool)),
    "volumeBindingMode": str, "reclaimPolicy": str, "mountOptions": ListOf(str), "allowVolumeExpansion": bool,
    "allowedTopologies": ListOf({"matchLabelExpressions": ListOf({"key": str, "values": ListOf(str)})}),
}
STATEFUL_SET: dict[str, Any] = {
    "kind": str, "metadata": METADATA,
    "spec": {"replicas": int, "selector": LABEL_SELECTOR, "template": {"metadata": METADATA, "spec": POD_SPEC}},
}
BY_KIND: dict[str, dict[str, Any]] = {
    "Node": NODE, "Pod": POD, "PersistentVolumeClaim": PVC, "PersistentVolume": PV, "StorageClass": STORAGE_CLASS,
    "StatefulSet": STATEFUL_SET,
}
"""The schema of each kind we read (Longhorn objects are checked by the locality planner)."""


# -- custom resources the planners read --------------------------------------------------------------
LONGHORN_VOLUME: dict[str, Any] = {
    "metadata": METADATA,
    "spec": {"numberOfReplicas": (int, str), "dataLocality": str, "size": QUANTITY, "diskSelector": ListOf(str),
             "nodeSelector": ListOf(str), "nodeID": str},
    "status": {"currentNodeID": str, "actualSize": QUANTITY},
}
LONGHORN_REPLICA: dict[str, Any] = {
    "metadata": METADATA,
    "spec": {"volumeName": str, "nodeID": str, "diskID": str, "healthyAt": str, "failedAt": str},
}
LONGHORN_NODE: dict[str, Any] = {
    "metadata": METADATA,
    "spec": {"allowScheduling": bool, "tags": ListOf(str),
             "disks": MapOf({"allowScheduling": bool, "evictionRequested": bool, "storageReserved": QUANTITY,
                             "tags": ListOf(str)})},
    "status": {"zone": str, "conditions": ListOf({"type": str, "status": str}),
               "diskStatus": MapOf({"storageAvailable": QUANTITY, "storageMaximum": QUANTITY,
                                    "storageScheduled": QUANTITY, "diskUUID": str})},
}
LONGHORN_INPUT: dict[str, Any] = {
    "volumes": ListOf(LONGHORN_VOLUME), "replicas": ListOf(LONGHORN_REPLICA), "nodes": ListOf(LONGHORN_NODE),
    "storageClass": STORAGE_CLASS, "settings": MapOf(ANY),
}
"""The single-mapping form of ``cloudzones plan locality -f``."""
SNAPSHOT: dict[str, Any] = {
    "nodes": ListOf(NODE), "pods": ListOf(POD), "persistentVolumeClaims": ListOf(PVC),
    "persistentVolumes": ListOf(PV), "foundationDBClusters": ListOf({"metadata": METADATA, "spec": MapOf(ANY)}),
}
"""The single-mapping form of a ``cloudzones plan outage`` snapshot."""
# Longhorn's objects as listed (`cloudzones report` plans their data locality); a malformed volume is the
# locality planner's own finding, so volumes are only required to be mappings here.
SNAPSHOT.update({"longhornVolumes": ListOf(MapOf(ANY)), "longhornReplicas": ListOf(LONGHORN_REPLICA),
                 "longhornNodes": ListOf(LONGHORN_NODE),
                 "longhornSettings": ListOf({"metadata": METADATA, "value": ANY})})
LOKI_STACK: dict[str, Any] = {
    "metadata": METADATA,
    # Numbers are left to the planner's own rules (factor-invalid, zone-max-skew, replicas-invalid).
    "spec": {"size": str, "replicationFactor": ANY,
             "replication": {"factor": ANY, "zones": ListOf({"topologyKey": ANY, "maxSkew": ANY})},
             "template": MapOf({"replicas": ANY, "nodeSelector": MapOf(str),
                                "tolerations": ListOf({"key": str, "operator": str, "value": str, "effect": str})})},
}
SNAPSHOT["lokiStacks"] = ListOf(LOKI_STACK)
"""A snapshot may carry LokiStacks: `cloudzones report` plans them."""
FDB_CLUSTER: dict[str, Any] = {
    "metadata": METADATA,
    "spec": {"version": str, "databaseConfiguration": MapOf(ANY), "processCounts": MapOf(ANY),
             "localities": ListOf({"key": str, "value": str, "envValue": str, "topologyKey": str}),
             "coordinatorSelection": ListOf(MapOf(ANY)), "processes": MapOf(ANY)},
    "processes": ListOf({"id": str, "processClass": str, "node": str, "env": MapOf(ANY), "version": str,
                         "excluded": bool}),
}
BY_KIND.update({"LokiStack": LOKI_STACK, "FoundationDBCluster": FDB_CLUSTER})


def check_manifest(manifest: Mapping[str, Any], path: str = "") -> None:
    """Check a manifest against its kind's schema (kinds we do not know pass: their planners check them)."""
    kind = manifest.get("kind")
    schema = BY_KIND.get(kind) if isinstance(kind, str) else None
    check(manifest, schema if schema is not None else {"kind": str, "metadata": METADATA}, path)
