"""`StorageClassSpec`: an Azure disk StorageClass manifest, checked against every rule and normalised.

The rules follow the in-tree Azure disk provisioner and the Azure availability-zones KEP; where
they disagree (a zone value of ``"0"``, a zone parameter of another region) we refuse instead of
silently creating an unzoned disk. Every error is an `InvalidStorageClass` whose ``rule`` is a
`Rule` and whose message quotes the offending values.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Collection, Mapping
from typing import Any

from cloudzones import errors, labels, topology
from storageclass import parameters, zonelabel
from storageclass.rules import Rule


def _fail(rule: Rule, name: str, detail: str) -> errors.InvalidStorageClass:
    where = f"StorageClass {name!r}" if name else "StorageClass"
    return errors.InvalidStorageClass(f"{where} breaks rule {rule.value!r}: {detail}", rule=rule.value)


# Read before the class: inside it, ``parameters`` is the field of that name.
_AZURE_DISK_PROVISIONERS = parameters.AZURE_DISK_PROVISIONERS


@dataclasses.dataclass(frozen=True)
class StorageClassSpec:
    """A validated Azure disk StorageClass. Build it with :meth:`from_manifest`."""

    name: str
    """``metadata.name`` (``""`` when the manifest has none)."""
    provisioner: str
    """The ``provisioner`` field as written."""
    kind: str
    """Disk kind: ``Managed`` (the default), ``Shared`` or ``Dedicated`` (legacy blob disks)."""
    sku: str
    """The disk SKU (``skuName`` / ``storageaccounttype``), spelled as ARM spells it; ``Premium_LRS`` by default."""
    zoned: bool
    """Whether disks get an availability zone (``zoned``; true by default for managed disks)."""
    zone: str | None
    """The ``zone`` parameter, or None."""
    zones: tuple[str, ...]
    """The ``zones`` parameter, sorted and without duplicates (``()`` when not set)."""
    allowed_zones: tuple[str, ...]
    """The zones ``allowedTopologies`` allows, sorted (``()`` when it is not set)."""
    binding_mode: str
    """``volumeBindingMode``: ``Immediate`` (default) or ``WaitForFirstConsumer``."""
    caching_mode: str
    """Host caching: ``None``, ``ReadOnly`` (default) or ``ReadWrite``; ``None`` for SKUs that cannot cache."""
    fs_type: str
    """The file system to create (``fsType``; ``ext4`` by default)."""
    reclaim_policy: str
    """``reclaimPolicy``: ``Delete`` (default) or ``Retain``."""
    region: str | None
    """The region zones are checked against: the ``region`` given to :meth:`from_manifest`, else ``location``."""
    location: str | None = None
    """The ``location`` parameter (normalised), or None."""
    resource_group: str | None = None
    """The ``resourceGroup`` parameter, or None (the cluster's resource group)."""
    allow_volume_expansion: bool = False
    """``allowVolumeExpansion``."""
    mount_options: tuple[str, ...] = ()
    """``mountOptions``."""
    parameters: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    """Every parameter as written (read-only), for the options this class does not model (tags, IOPS, ...)."""

    @property
    def zone_redundant(self) -> bool:
        """Whether the SKU is zone-redundant (``Premium_ZRS``, ``StandardSSD_ZRS``): no zone, usable everywhere."""
        return self.sku in parameters.ZONE_REDUNDANT_SKUS

    @property
    def wait_for_first_consumer(self) -> bool:
        """Whether provisioning waits for the scheduler to pick a node."""
        return self.binding_mode == parameters.WAIT_FOR_FIRST_CONSUMER

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any], *, region: str | None = None,
                      provisioners: Collection[str] = _AZURE_DISK_PROVISIONERS) -> StorageClassSpec:
        """Check a StorageClass manifest (a ``kubectl -o json`` dict) against every rule.

        ``region`` is the cluster's region (from the provider config); when given, every zone value
        must be one of its zones. ``provisioner`` must be one of ``provisioners`` (the Azure disk
        provisioners; a provisioner running under another name adds its own), when the manifest names one.
        Raises `InvalidStorageClass` naming the rule and the values.
        """
        if not isinstance(manifest, Mapping):
            raise _fail(Rule.MANIFEST, "", f"expected a StorageClass mapping, got {type(manifest).__name__}")
        metadata = manifest.get("metadata") or {}
        name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
        kind = manifest.get("kind")
        if kind is not None and kind != "StorageClass":
            raise _fail(Rule.MANIFEST, name, f"kind must be StorageClass, got {kind!r}")
        provisioner = manifest.get("provisioner")
        if provisioner is not None and provisioner not in provisioners:
            raise _fail(Rule.PROVISIONER, name, f"provisioner {provisioner!r} does not create Azure disks; "
                        f"expected one of {sorted(provisioners)}")
        params = _parameters(manifest.get("parameters"), name)

        disk_kind = _kind(params.get("kind", ""), name)
        sku = _sku(params, name)
        zoned = _zoned(params.get("zoned", ""), disk_kind, name)
        if disk_kind != parameters.MANAGED and params.get("resourcegroup"):
            raise _fail(Rule.RESOURCE_GROUP_KIND, name,
                        f"resourceGroup={params['resourcegroup']!r} can only be used with managed disks, "
                        f"not kind={params['kind']!r}")
        binding_mode = _choice(manifest, "volumeBindingMode", parameters.BINDING_MODES, Rule.BINDING_MODE, name)
        reclaim_policy = _choice(manifest, "reclaimPolicy", parameters.RECLAIM_POLICIES, Rule.RECLAIM_POLICY, name)
        region_used, location = _region(region, params.get("location"), name)

        zone = params.get("zone")
        zones = _zones_list(params["zones"], name) if "zones" in params else None
        allowed = _allowed_zones(manifest.get("allowedTopologies"), name)
        _check_combinations(name, zoned=zoned, zone=zone, zones=zones, allowed=allowed,
                            binding_mode=binding_mode, sku=sku)
        for what, values in (("zone", [zone] if zone is not None else []), ("zones", zones or []),
                             ("allowedTopologies", sorted(allowed or []))):
            for value in values:
                _check_zone_value(what, value, region_used, name)

        return cls(
            name=name,
            provisioner=str(manifest.get("provisioner") or ""),
            kind=disk_kind,
            sku=sku,
            zoned=zoned,
            zone=zone,
            zones=tuple(sorted(set(zones or []))),
            allowed_zones=tuple(sorted(allowed or [])),
            binding_mode=binding_mode,
            caching_mode=_caching_mode(params.get("cachingmode", ""), sku, name),
            fs_type=(params.get("fstype") or params.get("csi.storage.k8s.io/fstype") or
                     parameters.DEFAULT_FS_TYPE).lower(),
            reclaim_policy=reclaim_policy,
            region=region_used,
            location=location,
            resource_group=params.get("resourcegroup") or None,
            allow_volume_expansion=manifest.get("allowVolumeExpansion") is True,
            mount_options=tuple(str(option) for option in manifest.get("mountOptions") or ()),
            parameters=types.MappingProxyType(dict(manifest.get("parameters") or {})),
        )


def _parameters(raw: object, name: str) -> dict[str, str]:
    """The parameters keyed by lower-case name, checked for type, duplicates and unknown names."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _fail(Rule.MANIFEST, name, f"parameters must be a mapping of strings, got {type(raw).__name__}")
    result: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise _fail(Rule.MANIFEST, name,
                        f"parameter {key!r} must be a string, got {value!r} ({type(value).__name__}); "
                        f"Kubernetes only passes strings, so quote it in YAML")
        lowered = key.lower()
        if lowered in result:
            raise _fail(Rule.DUPLICATE_PARAMETER, name,
                        f"parameters {spelled[lowered]!r} and {key!r} are the same (names ignore case)")
        if not parameters.is_known(key):
            raise _fail(Rule.UNKNOWN_PARAMETER, name,
                        f"parameter {key!r}={value!r} is not an Azure disk parameter "
                        f"(known: {', '.join(sorted(parameters.KNOWN))})")
        result[lowered] = value
        spelled[lowered] = key
    return result


def _kind(value: str, name: str) -> str:
    if not value:
        return parameters.MANAGED
    found = parameters.canonical(value, parameters.KINDS)
    if found is None:
        raise _fail(Rule.KIND, name, f"kind={value!r} is not one of {', '.join(parameters.KINDS)}")
    return found


def _sku(params: Mapping[str, str], name: str) -> str:
    given = {key: params[key] for key in ("skuname", "storageaccounttype") if params.get(key)}
    if len(given) == 2 and given["skuname"].lower() != given["storageaccounttype"].lower():
        raise _fail(Rule.SKU, name, f"skuName={given['skuname']!r} and storageaccounttype="
                                    f"{given['storageaccounttype']!r} disagree; set one of them")
    if not given:
        return parameters.DEFAULT_SKU
    value = next(iter(given.values()))
    found = parameters.canonical(value, parameters.SKUS)
    if found is None:
        raise _fail(Rule.SKU, name, f"skuName={value!r} is not a managed disk SKU "
                                    f"(supported: {', '.join(parameters.SKUS)})")
    return found


def _zoned(value: str, kind: str, name: str) -> bool:
    if value == "":
        return kind == parameters.MANAGED
    if value.lower() not in ("true", "false"):
        raise _fail(Rule.ZONED_VALUE, name, f"zoned={value!r} must be \"true\" or \"false\"")
    zoned = value.lower() == "true"
    if zoned and kind != parameters.MANAGED:
        raise _fail(Rule.ZONED_KIND, name, f"zoned={value!r} needs managed disks, but kind={kind!r}")
    return zoned


def _choice(manifest: Mapping[str, Any], field: str, choices: tuple[str, ...], rule: Rule, name: str) -> str:
    value = manifest.get(field)
    if value is None:
        return choices[0]
    if value not in choices:
        raise _fail(rule, name, f"{field}={value!r} is not one of {', '.join(choices)}")
    return str(value)


def _region(region: str | None, location: str | None, name: str) -> tuple[str | None, str | None]:
    """(region to check zones against, normalised location parameter)."""
    cluster = topology.normalize_region(region) if region else None
    disk = topology.normalize_region(location) if location else None
    if cluster and disk and cluster != disk:
        raise _fail(Rule.LOCATION, name, f"location={location!r} is not the cluster's region {cluster!r}; "
                                         f"zoned disks must be in the region of the nodes that attach them")
    return cluster or disk, disk


def _zones_list(value: str, name: str) -> list[str]:
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise _fail(Rule.ZONES_LIST, name, f"zones={value!r} must be zones separated by commas, "
                                           f"without empty entries")
    return items


def _allowed_zones(raw: object, name: str) -> set[str] | None:
    """The union of the zone values of every allowedTopologies term, or None when it is not set."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise _fail(Rule.MANIFEST, name, f"allowedTopologies must be a list of terms, got {raw!r}")
    if not raw:
        return None
    zones: set[str] = set()
    for term in raw:
        expressions = term.get("matchLabelExpressions") if isinstance(term, Mapping) else None
        if not isinstance(expressions, list) or not expressions:
            raise _fail(Rule.ALLOWED_TOPOLOGIES_VALUES, name,
                        f"allowedTopologies term {term!r} has no matchLabelExpressions")
        for expression in expressions:
            key = expression.get("key") if isinstance(expression, Mapping) else None
            values = expression.get("values") if isinstance(expression, Mapping) else None
            if key not in labels.ZONE_KEYS:
                raise _fail(Rule.ALLOWED_TOPOLOGIES_KEY, name,
                            f"allowedTopologies key {key!r} is not supported; use {labels.ZONE} "
                            f"(or {labels.BETA_ZONE})")
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                raise _fail(Rule.ALLOWED_TOPOLOGIES_VALUES, name,
                            f"allowedTopologies key {key} needs a non-empty list of zone strings, got {values!r}")
            zones.update(values)
    return zones


def _check_combinations(name: str, *, zoned: bool, zone: str | None, zones: list[str] | None,
                        allowed: set[str] | None, binding_mode: str, sku: str) -> None:
    given: list[str] = []
    if zone is not None:
        given.append(f"zone={zone!r}")
    if zones is not None:
        given.append(f"zones={','.join(zones)!r}")
    if not zoned and (given or allowed):
        listed = given + ([f"allowedTopologies={sorted(allowed)}"] if allowed else [])
        raise _fail(Rule.ZONE_REQUIRES_ZONED, name,
                    f"{' and '.join(listed)} cannot be used with zoned=\"false\"")
    if zone is not None and zones is not None:
        raise _fail(Rule.ZONE_AND_ZONES, name, f"{given[0]} and {given[1]} cannot be used together; keep one")
    if given and allowed:
        raise _fail(Rule.ZONE_AND_ALLOWED_TOPOLOGIES, name,
                    f"{given[0]} cannot be used together with allowedTopologies={sorted(allowed)}; keep one")
    if given and binding_mode == parameters.WAIT_FOR_FIRST_CONSUMER:
        raise _fail(Rule.ZONE_WITH_WAIT_FOR_FIRST_CONSUMER, name,
                    f"{given[0]} cannot be used with volumeBindingMode=WaitForFirstConsumer (the disk goes "
                    f"in the zone of the node the scheduler picks); use allowedTopologies to constrain zones")
    if given and sku in parameters.ZONE_REDUNDANT_SKUS:
        raise _fail(Rule.ZONE_WITH_ZONE_REDUNDANT_SKU, name,
                    f"{given[0]} cannot be used with the zone-redundant skuName={sku!r}, whose disks have no zone")


def _check_zone_value(what: str, value: str, region: str | None, name: str) -> None:
    if zonelabel.is_zone(value, region):
        return
    if zonelabel.is_fault_domain(value):
        problem = "is a fault domain (an unzoned VM's label), never an availability zone"
    elif region:
        problem = f"is not an availability zone of region {region!r}"
    else:
        problem = "is not an availability zone label"
    example = topology.make_zone(region, 1) if region else "eastus-1"
    raise _fail(Rule.ZONE_FORMAT, name, f"{what} value {value!r} {problem}; write zones as "
                                        f"<region>-<number>, e.g. {example!r}")


def _caching_mode(value: str, sku: str, name: str) -> str:
    if not value:
        return "None" if sku in parameters.UNCACHED_SKUS else parameters.DEFAULT_CACHING_MODE
    found = parameters.canonical(value, parameters.CACHING_MODES)
    if found is None:
        raise _fail(Rule.CACHING_MODE, name,
                    f"cachingMode={value!r} is not one of {', '.join(parameters.CACHING_MODES)}")
    if found != "None" and sku in parameters.UNCACHED_SKUS:
        raise _fail(Rule.CACHING_MODE, name, f"cachingMode={value!r} is not possible with skuName={sku!r}, "
                                             f"whose disks support only cachingMode None")
    return found
