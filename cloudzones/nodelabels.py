"""Which topology labels a node should carry and the merge patch that gets it there (pure).

Labels that are already right are left alone (no PATCH when nothing changes); labels that are
wrong are fixed; our fault-domain label is removed from a node that turned out to be zoned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from cloudzones import labels
from cloudzones.topology import Topology

MANAGED_KEYS = frozenset({labels.ZONE, labels.REGION, labels.BETA_ZONE, labels.BETA_REGION,
                          labels.FAULT_DOMAIN, labels.SUB_FAULT_DOMAIN, labels.AZURE_MANAGED})
"""The node labels the labeller reads; an informer keeps only these."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeView:
    """The slice of a Node the labeller needs (a full Node is ~10 KB; this is ~200 bytes).

    Status-only updates (heartbeats) leave it unchanged, so the informer does not requeue the node.
    """

    name: str
    provider_id: str
    labels: Mapping[str, str]

    @property
    def unmanaged(self) -> bool:
        """``kubernetes.azure.com/managed=false``: the cloud provider does not manage this node."""
        return self.labels.get(labels.AZURE_MANAGED, "").lower() == "false"


def project(node: Mapping[str, Any]) -> NodeView:
    """Reduce a Node manifest to a `NodeView`."""
    meta = node.get("metadata") or {}
    all_labels = meta.get("labels") or {}
    return NodeView(name=str(meta.get("name") or ""), provider_id=str((node.get("spec") or {}).get("providerID") or ""),
                    labels={k: str(v) for k, v in all_labels.items() if k in MANAGED_KEYS})


def desired_labels(topology: Topology, *, beta: bool = True) -> dict[str, str]:
    """The labels a node in ``topology`` should carry."""
    return topology.node_labels(beta=beta)


def label_patch(current: Mapping[str, str], topology: Topology, *, beta: bool = True) -> dict[str, Any] | None:
    """The merge patch that makes ``current`` right for ``topology``, or None when it already is."""
    wanted = desired_labels(topology, beta=beta)
    changes: dict[str, str | None] = {k: v for k, v in wanted.items() if current.get(k) != v}
    if topology.is_availability_zone and labels.FAULT_DOMAIN in current:
        changes[labels.FAULT_DOMAIN] = None  # a zoned node has no business with our fault-domain label
    if not changes:
        return None
    return {"metadata": {"labels": changes}}
