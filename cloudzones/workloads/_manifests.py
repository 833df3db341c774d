"""Small readers for plain manifest dicts shared by the workload planners (names, zones, schedulability, numbers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones import labels, shapes
from cloudzones.placement import selectors
from cloudzones.workloads import findings

_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name`` (``""`` when absent)."""
    return str((obj.get("metadata") or {}).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace``, ``default`` when absent."""
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` as strings."""
    return selectors.labels_of(obj)


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.annotations`` as strings."""
    raw = (obj.get("metadata") or {}).get("annotations") or {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def node_zone(node: Mapping[str, Any], key: str = labels.ZONE) -> str:
    """The node's zone label under ``key`` (the GA zone key falls back to the beta one), ``""`` when absent."""
    node_labels = labels_of(node)
    if key in node_labels:
        return node_labels[key]
    if key == labels.ZONE:
        return node_labels.get(labels.BETA_ZONE, "")
    return ""


def schedulable(node: Mapping[str, Any]) -> bool:
    """Not cordoned and without any NoSchedule/NoExecute taint (tolerations are not considered)."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    return not any(isinstance(t, Mapping) and t.get("effect") in _BLOCKING_EFFECTS for t in spec.get("taints") or [])


def node_names(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every node's name, checking each has one and none repeats."""
    seen: list[str] = []
    for index, node in enumerate(nodes):
        name = name_of(node)
        if not name:
            raise findings.invalid("node-name", f"node #{index} has no metadata.name")
        if name in seen:
            raise findings.invalid("node-name", f"node {name!r} is listed twice")
        seen.append(name)
    return seen


MAX_COUNT = 100_000
"""The most replicas, processes or members one input may ask for: planning is linear, but a file saying
10^30 must not make a command run forever."""


def positive_int(value: Any, where: str, subject: str = "", *, rule: str = "not-a-number",
                 minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int in ``[minimum, maximum]`` (digit strings accepted); `InvalidWorkloadSpec` otherwise."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value) < 20:
        number = int(value.strip())
    if number is None or number < minimum:
        raise findings.invalid(rule, f"{where} must be an integer of at least {minimum}, got {value!r:.40}", subject)
    if number > maximum:
        raise findings.invalid(rule, f"{where} is {value!r:.40}, more than the {maximum:,} this planner accepts",
                               subject)
    return number


def shaped(value: Any, schema: shapes.Schema, where: str = "", subject: str = "") -> None:
    """Check ``value`` against ``schema``; a wrong type is `InvalidWorkloadSpec` naming its path."""
    try:
        shapes.check(value, schema, where)
    except shapes.ShapeError as exc:
        raise findings.invalid("shape", str(exc), subject) from None


def mapping(value: Any, where: str, subject: str = "") -> Mapping[str, Any]:
    """``value`` when it is a mapping, ``{}`` when None; `InvalidWorkloadSpec` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise findings.invalid("not-a-mapping", f"{where} must be a mapping, got {value!r}", subject)
    return value


def sequence(value: Any, where: str, subject: str = "") -> list[Any]:
    """``value`` as a list, ``[]`` when None; `InvalidWorkloadSpec` for a string or scalar."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise findings.invalid("not-a-list", f"{where} must be a list, got {value!r}", subject)
    return list(value)


def some(names: Sequence[str], limit: int = 8) -> str:
    """``'a', 'b' and 3 more`` for messages."""
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
