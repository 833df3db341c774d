"""Which nodes belong in a Standard load balancer's backend pool, and the Basic-SKU zone check (pure).

The rules follow cloud-provider-azure (``updateNodeCaches``, ``isControlPlaneNode``): a node's
manifest (kubectl ``-o json`` shape) and the cloud config decide; nothing here talks to Azure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cloudzones import errors, labels
from cloudzones.topology import is_availability_zone, normalize_region
from providers.azure import resource_ids
from providers.azure.config import AzureConfig

EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
MASTER_LABEL = "node-role.kubernetes.io/master"
LEGACY_ROLE_LABEL = "kubernetes.io/role"
"""``kubernetes.io/role=master`` marked control-plane nodes before 1.19; cloud-provider-azure still honours it."""
EXTERNAL_GROUP_LABEL = "kubernetes.azure.com/resource-group"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
_ZONE_LABEL = re.compile(r"([a-z0-9]+)-[0-9]+")


@dataclasses.dataclass(frozen=True)
class PoolMember:
    """A node that belongs in the backend pool."""

    node: str
    kind: str
    """``vm`` (standalone, availability-set or flexible-VMSS VM) or ``vmss-instance`` (uniform scale set)."""
    machine: str
    """The VM's or scale-set instance's ARM ID (from ``spec.providerID``)."""
    zone: str
    """The node's zone label (``eastus-1``, or a fault domain), ``""`` when unlabelled."""
    address: str
    """The node's InternalIP (IPv4 preferred), ``""`` when it reports none."""


@dataclasses.dataclass(frozen=True)
class ExcludedNode:
    """A node kept out of the pool, with every reason that applies."""

    node: str
    reasons: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class DuplicateProviderId:
    """Several nodes naming the same machine: a stale Node object, or a copy-paste in a nodes file."""

    provider_id: str
    nodes: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class PoolMembership:
    """Who goes into the backend pool and who does not (each in input order)."""

    members: tuple[PoolMember, ...]
    excluded: tuple[ExcludedNode, ...]
    duplicates: tuple[DuplicateProviderId, ...] = ()
    """Provider IDs (compared ignoring case, as ARM does) that more than one node carries."""


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def node_zone(node: Mapping[str, Any]) -> str:
    """The node's zone label (GA key, else beta), ``""`` when it has none."""
    found = _labels(node)
    return str(found.get(labels.ZONE) or found.get(labels.BETA_ZONE) or "")


def _internal_ip(node: Mapping[str, Any]) -> str:
    addresses = [a for a in (node.get("status") or {}).get("addresses") or [] if a.get("type") == "InternalIP"]
    ipv4 = [str(a.get("address") or "") for a in addresses if ":" not in str(a.get("address") or "")]
    return next((a for a in ipv4 if a), "") or next((str(a["address"]) for a in addresses if a.get("address")), "")


def is_control_plane(node: Mapping[str, Any]) -> bool:
    """cloud-provider-azure's ``isControlPlaneNode``: either role label, or ``kubernetes.io/role=master``."""
    found = _labels(node)
    return CONTROL_PLANE_LABEL in found or MASTER_LABEL in found or found.get(LEGACY_ROLE_LABEL) == "master"


def _explicitly_not_ready(node: Mapping[str, Any]) -> bool:
    # Upstream skips NotReady nodes unless they are still uninitialised (new nodes must not churn the
    # scale-set model, cloud-provider-azure #851). A manifest without conditions is taken as ready.
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    taints = (node.get("spec") or {}).get("taints") or []
    uninitialized = any(t.get("key") == UNINITIALIZED_TAINT for t in taints)
    return ready is not None and ready.get("status") != "True" and not uninitialized


def _exclusion_reasons(node: Mapping[str, Any], config: AzureConfig) -> list[str]:
    found = _labels(node)
    reasons = []
    if str(found.get(labels.AZURE_MANAGED, "")).lower() == "false":
        reasons.append(f"not managed by Azure ({labels.AZURE_MANAGED}=false)")
    if EXCLUDE_LB_LABEL in found:
        reasons.append(f"labelled {EXCLUDE_LB_LABEL}")
    if config.load_balancer_sku == "standard" and config.exclude_master_from_standard_lb and is_control_plane(node):
        reasons.append("control-plane node (excludeMasterFromStandardLB is true)")
    group = str(found.get(EXTERNAL_GROUP_LABEL) or "")
    if group and config.resource_group and group.lower() != config.resource_group.lower():
        reasons.append(f"in external resource group {group!r} ({EXTERNAL_GROUP_LABEL})")
    if _explicitly_not_ready(node):
        reasons.append("not Ready")
    return reasons


def backend_pool_members(nodes: Iterable[Mapping[str, Any]], config: AzureConfig) -> PoolMembership:
    """Split node manifests into pool members (VMs and scale-set instances) and excluded nodes with reasons.

    Excluded, as cloud-provider-azure does: unmanaged nodes, nodes labelled
    ``node.kubernetes.io/exclude-from-external-load-balancers``, control-plane nodes while
    ``excludeMasterFromStandardLB`` is true (Standard SKU), nodes in another resource group than the
    cloud config's (by the resource-group label or by their provider ID), NotReady nodes that are
    already initialised, and nodes whose ``spec.providerID`` is missing, not Azure's, or malformed.
    A machine is a member once: a later node naming the same provider ID is excluded, and every
    shared provider ID is reported in ``duplicates``.
    """
    members: list[PoolMember] = []
    excluded: list[ExcludedNode] = []
    nodes = list(nodes)
    claimed: dict[str, str] = {}
    for node in nodes:
        name = _name(node)
        reasons = _exclusion_reasons(node, config)
        provider_id = (node.get("spec") or {}).get("providerID")
        parsed = None
        try:
            parsed = resource_ids.parse_provider_id(provider_id if isinstance(provider_id, str) else "")
            if parsed is None:
                reasons.append(f"provider ID {provider_id!r} is not an Azure machine")
        except errors.InvalidResourceId as exc:
            reasons.append(str(exc))
        if parsed is not None and config.resource_group and not parsed.same_group(config.resource_group):
            # A machine in another group is not ours to put in the pool, label or not.
            reasons.append(f"in resource group {parsed.resource_group!r} by its provider ID, not the cloud "
                           f"config's {config.resource_group!r}")
        first = claimed.get(str(provider_id).lower()) if parsed is not None else None
        if first is not None:
            reasons.append(f"same provider ID as node {first!r}: the pool holds each machine once")
        if reasons or parsed is None:
            excluded.append(ExcludedNode(name, tuple(reasons)))
            continue
        claimed[str(provider_id).lower()] = name
        kind = "vmss-instance" if parsed.is_scale_set_instance else "vm"
        members.append(PoolMember(node=name, kind=kind, machine=str(provider_id)[len("azure://"):],
                                  zone=node_zone(node), address=_internal_ip(node)))
    return PoolMembership(tuple(members), tuple(excluded), duplicate_provider_ids(nodes))


def duplicate_provider_ids(nodes: Iterable[Mapping[str, Any]]) -> tuple[DuplicateProviderId, ...]:
    """Provider IDs (ignoring case) that several nodes carry, with those nodes, in input order."""
    seen: dict[str, tuple[str, list[str]]] = {}
    for node in nodes:
        provider_id = (node.get("spec") or {}).get("providerID")
        if isinstance(provider_id, str) and provider_id:
            seen.setdefault(provider_id.lower(), (provider_id, []))[1].append(_name(node))
    return tuple(DuplicateProviderId(pid, tuple(names)) for pid, names in seen.values() if len(names) > 1)


def nodes_region(nodes: Iterable[Mapping[str, Any]]) -> str:
    """The region the nodes' ``topology.kubernetes.io/region`` labels name, else the one their
    ``<region>-<n>`` zone labels imply; ``""`` when neither says."""
    nodes = list(nodes)
    for node in nodes:
        found = _labels(node)
        region = found.get(labels.REGION) or found.get(labels.BETA_REGION)
        if region:
            return normalize_region(str(region))
    for node in nodes:
        match = _ZONE_LABEL.fullmatch(node_zone(node))
        if match:
            return match.group(1)
    return ""


def check_sku_for_zones(config: AzureConfig, nodes: Sequence[Mapping[str, Any]]) -> None:
    """`ConfigError` when ``loadBalancerSku`` is basic but some node sits in an availability zone."""
    if config.load_balancer_sku != "basic":
        return
    region = config.location or nodes_region(nodes)
    zoned = [f"{_name(n)} ({node_zone(n)})" for n in nodes if is_availability_zone(node_zone(n), region)]
    if zoned:
        shown = ", ".join(zoned[:5]) + (f" and {len(zoned) - 5} more" if len(zoned) > 5 else "")
        raise errors.ConfigError(
            f"loadBalancerSku is 'basic' but {len(zoned)} node(s) are in availability zones: {shown}. Basic load"
            " balancers and public IPs cannot be zonal or zone-redundant, so availability zones need"
            " loadBalancerSku: standard in the cloud config")


