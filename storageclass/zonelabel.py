"""Telling availability-zone labels (``eastus-2``) from fault domains (``"0"``) and foreign regions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from cloudzones import labels, topology

# Without a region we can only check the shape: an Azure region name, a dash, a zone number.
_ZONE_SHAPE = re.compile(r"[a-z][a-z0-9]*-(?:0|[1-9][0-9]*)")
_DIGITS = re.compile(r"[0-9]+")


def is_fault_domain(value: str) -> bool:
    """Whether a zone label value is an unzoned VM's fault domain (plain digits, ``"0"``, ``"36"``)."""
    return bool(_DIGITS.fullmatch(value))


def is_zone(value: str, region: str | None) -> bool:
    """Whether ``value`` is an availability zone label, written canonically (``eastus-1``, not ``eastus-01``).

    With ``region`` it must be a zone of that region; without, it must only look like one.
    """
    if not region:
        return bool(_ZONE_SHAPE.fullmatch(value))
    number = topology.zone_id(value, region)
    return bool(number) and value == topology.make_zone(region, number)


def split_active(zones: Iterable[str], region: str | None) -> tuple[list[str], list[str]]:
    """(availability zones, ignored values) among the zone labels of a cluster's nodes, both sorted."""
    kept: set[str] = set()
    ignored: set[str] = set()
    for value in zones:
        (kept if is_zone(value, region) else ignored).add(value)
    return sorted(kept), sorted(ignored)


def node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    """A node manifest's labels (empty when it has none)."""
    metadata = node.get("metadata") or {}
    found = metadata.get("labels") or {}
    return found if isinstance(found, Mapping) else {}


def node_name(node: Mapping[str, Any]) -> str:
    """A node manifest's name, or ``"<unnamed>"``."""
    metadata = node.get("metadata") or {}
    return str(metadata.get("name") or "<unnamed>")


def node_zone(node: Mapping[str, Any]) -> tuple[str, str]:
    """(label key, value) of a node's zone: the GA label, then the beta one; ``("", "")`` when neither is set."""
    found = node_labels(node)
    for key in labels.ZONE_KEYS:
        value = found.get(key)
        if value:
            return key, str(value)
    return "", ""


def node_region(node: Mapping[str, Any]) -> str:
    """A node's region label (GA, then beta), or ``""``."""
    found = node_labels(node)
    for key in labels.REGION_KEYS:
        value = found.get(key)
        if value:
            return str(value)
    return ""
