"""Manifest builders for the workload planner tests (nodes with dotted label keys, LokiStacks)."""

from __future__ import annotations

from typing import Any

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOSTNAME = "kubernetes.io/hostname"


def node(name: str, zone: str | None, *, region: str = "eastus", taints: list[dict[str, Any]] | None = None,
         unschedulable: bool = False, **extra: str) -> dict[str, Any]:
    """A node in ``zone`` (None: no zone label) with hostname and region labels."""
    labels = {HOSTNAME: name, REGION: region, **extra}
    if zone is not None:
        labels[ZONE] = zone
    manifest: dict[str, Any] = {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {}}
    if taints:
        manifest["spec"]["taints"] = taints
    if unschedulable:
        manifest["spec"]["unschedulable"] = True
    return manifest


def zoned_nodes(zones: int = 3, per_zone: int = 2, region: str = "eastus") -> list[dict[str, Any]]:
    """``per_zone`` nodes in each of ``zones`` zones named ``<region>-<n>``."""
    return [node(f"n{z}{i}", f"{region}-{z}", region=region) for z in range(1, zones + 1) for i in range(per_zone)]


def lokistack(factor: int | None = 2, *, keys: tuple[str, ...] = (ZONE,), ingesters: int = 3,
              max_skew: int | None = None, **spec: Any) -> dict[str, Any]:
    """A LokiStack with ``spec.replication`` (unless ``factor`` is None) and the ingester replicas."""
    body: dict[str, Any] = {"template": {"ingester": {"replicas": ingesters}}, **spec}
    if factor is not None:
        zones = [{"topologyKey": k, **({"maxSkew": max_skew} if max_skew else {})} for k in keys]
        body["replication"] = {"factor": factor, "zones": zones}
    return {"apiVersion": "loki.grafana.com/v1", "kind": "LokiStack",
            "metadata": {"name": "logs", "namespace": "loki"}, "spec": body}


def rules(findings: Any) -> list[str]:
    """The rule names of some findings, in order."""
    return [f.rule for f in findings]
