"""Pods reduced to what the planners read, their repeated parts stored once (pure).

A snapshot of 150,000 pods parsed whole is ~700 MB of dicts, and most of it repeats: the pods of one
ReplicaSet carry the same labels, owner reference and containers. `PodCompactor` checks each pod's
shape, keeps only the fields the outage what-if, the zone report and the planners read (identity,
labels, annotations, owners, node, claims, requests and literal env values, phase, conditions, IPs:
`project_pod`) and stores each distinct labels map, annotation map, owner list, container list and
claim list once, checking it once. The result is read-only: a shared part changed through one pod
would change every pod that shares it.

Depth is bounded by construction: every kept field is a scalar or a fixed shape of scalars, so a
projected pod is never nested more than five levels, whatever the input held in the fields left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cloudzones import shapes

_META = ("name", "generateName", "namespace", "uid", "deletionTimestamp")
_OWNER = ("apiVersion", "kind", "name", "uid", "controller")
_OWN_SCHEMA: dict[str, Any] = {
    "kind": str,
    "metadata": {k: shapes.METADATA[k] for k in _META},
    "spec": {"nodeName": str},
    "status": {"phase": str, "podIP": str, "podIPs": shapes.ListOf({"ip": str}),
               "conditions": shapes.ListOf({"type": str, "status": str})},
}
"""What is checked of every pod: all it keeps but the parts that are shared."""
_PARTS: tuple[tuple[str, str, shapes.Schema, Callable[[Any], Any]], ...] = (
    ("metadata", "labels", shapes.METADATA["labels"], dict),
    ("metadata", "annotations", shapes.METADATA["annotations"], dict),
    ("metadata", "ownerReferences", shapes.METADATA["ownerReferences"],
     lambda owners: [{k: o[k] for k in _OWNER if k in o} for o in owners]),
    ("spec", "containers", shapes.POD_SPEC["containers"],
     lambda containers: [_container(c) for c in containers]),
    ("spec", "volumes", shapes.POD_SPEC["volumes"],
     lambda volumes: [{"name": v.get("name"), "persistentVolumeClaim": {
         "claimName": (v.get("persistentVolumeClaim") or {}).get("claimName")}}
         for v in volumes if v.get("persistentVolumeClaim")]),
)
_LONGEST_KEY = 4096
"""A part whose text is longer is checked and kept on its own (rarely repeated, and keys cost memory)."""


def _container(container: Mapping[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {"name": container.get("name"),
                            "resources": {"requests": dict((container.get("resources") or {}).get("requests") or {})}}
    # Literal env values: FoundationDB localities may come from them (coordinator selection reads them).
    env = [{"name": e.get("name"), "value": e["value"]} for e in container.get("env") or []
           if e.get("value") is not None]
    if env:
        kept["env"] = env
    return kept


def project_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What the planners read of a (shape-checked) pod: identity and owners, node, claims, requests, phase, IPs."""
    return PodCompactor(share=False)(pod)


class PodCompactor:
    """Checks, projects and shares pods; one per snapshot (its table lives as long as it does)."""

    def __init__(self, *, share: bool = True) -> None:
        self._share = share
        self._parts: dict[tuple[str, str], Any] = {}
        self._strings: dict[str, str] = {}

    def __call__(self, pod: Mapping[str, Any], where: str = "") -> dict[str, Any]:
        """The compact form of ``pod``; `shapes.ShapeError` (with ``where`` in its path) for a wrong type."""
        shapes.check(pod, _OWN_SCHEMA, where)
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        sections: dict[str, dict[str, Any]] = {
            "metadata": {k: meta[k] for k in _META if meta.get(k) is not None},
            "spec": {"nodeName": self._text(spec.get("nodeName"))},
            "status": {},
        }
        for section, field, schema, project in _PARTS:
            value = (pod.get(section) or {}).get(field)
            if value is not None:
                sections[section][field] = self._part(field, value, schema, project, f"{where}.{section}.{field}")
        kept = sections["status"]
        if status.get("phase") is not None:
            kept["phase"] = self._text(status["phase"])
        if status.get("podIP") is not None:
            kept["podIP"] = status["podIP"]
        if status.get("podIPs"):
            kept["podIPs"] = [{"ip": p.get("ip")} for p in status["podIPs"] if p is not None]
        if status.get("conditions"):
            kept["conditions"] = [{"type": self._text(c.get("type")), "status": self._text(c.get("status"))}
                                  for c in status["conditions"] if c is not None]
        if "namespace" in sections["metadata"]:
            sections["metadata"]["namespace"] = self._text(sections["metadata"]["namespace"])
        return {"apiVersion": "v1", "kind": "Pod", **sections}

    def _part(self, field: str, value: Any, schema: shapes.Schema, project: Callable[[Any], Any], where: str) -> Any:
        if not self._share:
            shapes.check(value, schema, where)
            return project(value)
        text = repr(value)
        if len(text) > _LONGEST_KEY:
            shapes.check(value, schema, where)
            return project(value)
        key = (field, text)
        found = self._parts.get(key)
        if found is None:
            shapes.check(value, schema, where)
            found = self._parts[key] = project(value)
        return found

    def _text(self, value: Any) -> Any:
        if type(value) is not str:
            return value
        return self._strings.setdefault(value, value) if self._share else value


MAX_DEPTH = 62
"""Nesting allowed in a listed item: the input limit (64) less the document and the list it sits in."""


class SnapshotItems:
    """What the snapshot loader keeps of each listed item: pods compacted, everything else checked and kept whole.

    Call it as ``documents.load_streamed``'s ``each`` (with ``check_depth=False``: a compact pod's depth
    is fixed, any other item is checked here): ``list_key`` is ``items`` (a ``List``), ``""`` (a
    top-level list) or a snapshot key (``pods``, ``nodes``... of the single-mapping form).
    """

    def __init__(self) -> None:
        self.pods = PodCompactor()

    def __call__(self, item: Any, place: str, list_key: str) -> Any:
        listed = list_key in ("items", "")
        if not isinstance(item, Mapping):
            # null is "absent" for a field, but a list item must be there (as shapes.ListOf says).
            wanted = "a manifest (a mapping)" if listed else "a mapping"
            raise shapes.ShapeError(f"{place}: expected {wanted}, got {shapes.describe(item)}", path=place)
        if list_key == "pods" or (listed and item.get("kind") == "Pod"):
            return self.pods(item, place)
        if listed:
            shapes.check_manifest(item, place)
        elif isinstance(shapes.SNAPSHOT.get(list_key), shapes.ListOf):
            shapes.check(item, shapes.SNAPSHOT[list_key].item, place)
        if shapes.deeper_than(item, MAX_DEPTH):
            raise shapes.ShapeError(f"{place}: nested more than {MAX_DEPTH + 2} levels deep", path=place)
        return item
