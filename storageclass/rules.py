"""The names of the StorageClass rules: those a class can break, and those that decide a disk's zone.

Every `InvalidStorageClass` / `NoZonedNodes` raised here carries one of these as ``.rule`` and
quotes it in its message; every `ZoneChoice` says which one decided.
"""

from __future__ import annotations

import enum


class Rule(str, enum.Enum):
    """A rule of the StorageClass checks or of the zone choice; the value is its short name."""

    # Broken by the manifest itself (from_manifest).
    MANIFEST = "manifest"
    PROVISIONER = "provisioner"
    UNKNOWN_PARAMETER = "unknown-parameter"
    DUPLICATE_PARAMETER = "duplicate-parameter"
    KIND = "kind"
    ZONED_VALUE = "zoned-value"
    ZONED_KIND = "zoned-kind"
    RESOURCE_GROUP_KIND = "resource-group-kind"
    SKU = "sku"
    CACHING_MODE = "caching-mode"
    BINDING_MODE = "volume-binding-mode"
    RECLAIM_POLICY = "reclaim-policy"
    LOCATION = "location"
    ZONE_REQUIRES_ZONED = "zone-requires-zoned"
    ZONE_AND_ZONES = "zone-and-zones"
    ZONE_AND_ALLOWED_TOPOLOGIES = "zone-and-allowed-topologies"
    ZONE_WITH_WAIT_FOR_FIRST_CONSUMER = "zone-with-wait-for-first-consumer"
    ZONE_WITH_ZONE_REDUNDANT_SKU = "zone-with-zone-redundant-sku"
    ALLOWED_TOPOLOGIES_KEY = "allowed-topologies-key"
    ALLOWED_TOPOLOGIES_VALUES = "allowed-topologies-values"
    ZONES_LIST = "zones-list"
    ZONE_FORMAT = "zone-format"
    # Broken by a StorageClass together with the claim or the cluster (select_zones).
    ZONE_REPLICAS = "zone-replicas"
    NOT_ENOUGH_ZONES = "not-enough-zones"
    UNZONED_DISK_ON_ZONED_NODE = "unzoned-disk-on-zoned-node"
    # Deciding rules, in the order they are tried (select_zones).
    ZONE_REDUNDANT = "zone-redundant"
    UNZONED = "unzoned"
    SELECTED_NODE = "selected-node"
    ALLOWED_TOPOLOGIES = "allowed-topologies"
    ALLOWED_TOPOLOGIES_WITHOUT_NODES = "allowed-topologies-without-nodes"
    ZONE = "zone"
    ZONES = "zones"
    ACTIVE_ZONES = "active-zones"

    def __str__(self) -> str:
        return self.value
