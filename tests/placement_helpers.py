"""Manifest builders for the placement tests (the shapes of kube-scheduler's st.MakePod / st.MakeNode)."""

from __future__ import annotations

from typing import Any

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def node(name: str, *, taints: list[dict[str, Any]] | None = None, **labels: str) -> dict[str, Any]:
    """A node manifest with ``labels`` (keyword names; use ``dict(**{...})`` for dotted keys)."""
    manifest: dict[str, Any] = {"metadata": {"name": name, "labels": dict(labels)}}
    if taints:
        manifest["spec"] = {"taints": taints}
    return manifest


def pod(name: str, node_name: str | None = None, *, namespace: str | None = None, terminating: bool = False,
        **labels: str) -> dict[str, Any]:
    """An existing pod bound to ``node_name`` (unbound when None)."""
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if namespace:
        metadata["namespace"] = namespace
    if terminating:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"nodeName": node_name} if node_name else {}}


def tsc(max_skew: int, key: str, selector: dict[str, Any] | None = FOO, *, when: str = "DoNotSchedule",
        **extra: Any) -> dict[str, Any]:
    """One topologySpreadConstraint; ``selector=None`` leaves labelSelector out (a nil selector)."""
    constraint: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        constraint["labelSelector"] = selector
    return constraint


def incoming(labels: dict[str, str], *constraints: dict[str, Any], node_selector: dict[str, str] | None = None,
             affinity_terms: list[dict[str, Any]] | None = None, tolerations: list[dict[str, Any]] | None = None,
             namespace: str | None = None) -> dict[str, Any]:
    """The pod being placed."""
    spec: dict[str, Any] = {"topologySpreadConstraints": list(constraints)}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if affinity_terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": affinity_terms}}}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    metadata: dict[str, Any] = {"name": "p", "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"metadata": metadata, "spec": spec}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A matchExpressions / nodeSelectorTerm requirement."""
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


def four_nodes(**extra: dict[str, str]) -> list[dict[str, Any]]:
    """kube-scheduler's usual fixture: node-a, node-b in zone1; node-x, node-y in zone2 (plus extra labels)."""
    layout = (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))
    return [node(name, zone=zone, node=name, **extra.get(name, {})) for name, zone in layout]
