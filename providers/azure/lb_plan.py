"""Pure planning for a zone-redundant Standard load balancer and its public IPs: zones and ARM bodies.

Nothing here talks to Azure: given the current ARM resource body (or None), it says which PUT, if
any, brings a public IP or load balancer to the wanted state, and refuses changes Azure cannot make
in place. `providers.azure.lb_members` picks the pool's nodes; `providers.azure.network` does the
GETs and PUTs.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cloudzones import errors
from cloudzones.topology import normalize_region, parse_zone_id, zone_id
from providers.azure import lb_members

DEFAULT_REGION_ZONES: tuple[str, ...] = ("1", "2", "3")
"""Every Azure region with availability zones has exactly three today; pass ``region_zones`` when that changes."""

STANDARD = "Standard"
REGIONAL = "Regional"
_READ_ONLY = frozenset({"provisioningState", "etag", "resourceGuid"})


@dataclasses.dataclass(frozen=True)
class PoolAddress:
    """One IP-based backend pool entry: a node's name and its private address."""

    name: str
    ip: str


@dataclasses.dataclass(frozen=True)
class BackendPool:
    """A backend pool to ensure; ``addresses=None`` leaves its members alone (NIC-based membership)."""

    name: str
    addresses: tuple[PoolAddress, ...] | None = None
    """When set, the pool holds exactly these (IP-based members in ``virtual_network``)."""
    virtual_network: str = ""
    """ARM ID of the virtual network the addresses live in; required with addresses."""

    def __post_init__(self) -> None:
        if self.addresses and not self.virtual_network:
            raise errors.ConfigError(f"backend pool {self.name!r} lists addresses but no virtual network;"
                                     " IP-based members need vnetName in the cloud config")

    @classmethod
    def for_members(cls, name: str, members: Iterable[lb_members.PoolMember], *, virtual_network: str) -> BackendPool:
        """An IP-based pool of the members that report an address (named after their nodes)."""
        return cls(name, tuple(PoolAddress(m.node, m.address) for m in members if m.address), virtual_network)


@dataclasses.dataclass(frozen=True, eq=False)
class Change:
    """What ensuring one ARM resource would do: ``create``, ``update`` or ``none``, with the PUT body."""

    resource: str
    """``publicIPAddress`` or ``loadBalancer``."""
    name: str
    action: str
    detail: str
    body: dict[str, Any] | None = None
    """The PUT body (None when the action is ``none``)."""
    etag: str = ""
    """The existing resource's ETag, sent as ``If-Match`` so a concurrent edit is not overwritten."""
    current: Mapping[str, Any] | None = None


# -- zones ---------------------------------------------------------------------------------------

def resolve_zones(zones: str | Sequence[str] | None, *, region: str,
                  region_zones: Sequence[str] = DEFAULT_REGION_ZONES) -> tuple[str, ...]:
    """Zone numbers for a public IP: all of ``region_zones`` when None, else one zone (``"2"`` or ``"eastus-2"``).

    A public IP is zonal (one zone) or zone-redundant (every zone of the region); anything in
    between, a fault domain, or another region's zone is `InvalidZone`.
    """
    available = tuple(str(parse_zone_id(z)) for z in region_zones)
    if zones is None:
        return tuple(sorted(set(available), key=int))
    asked = [zones] if isinstance(zones, str) else list(zones)
    picked: list[str] = []
    for zone in asked:
        number = zone_id(zone, region) if region and isinstance(zone, str) and "-" in zone else ""
        if not number:
            try:
                number = str(parse_zone_id(zone))
            except errors.InvalidZone as exc:
                raise errors.InvalidZone(
                    f"zone {zone!r} is neither a zone number nor an availability zone of region {region!r}") from exc
        if available and number not in available:
            raise errors.InvalidZone(f"zone {zone!r} is not one of region {region!r}'s zones {list(available)}")
        if number not in picked:
            picked.append(number)
    if not picked:
        raise errors.InvalidZone("no zones given: leave zones out for a zone-redundant IP, or give exactly one zone")
    if 1 < len(picked) < len(available):
        raise errors.InvalidZone(f"a public IP is zonal (one zone) or zone-redundant (all of {list(available)});"
                                 f" got zones {asked!r}")
    return tuple(sorted(picked, key=int))


def describe_zones(zones: Sequence[str]) -> str:
    """``zone-redundant (1, 2, 3)``, ``zonal (zone 2)`` or ``no zones``."""
    if not zones:
        return "no zones"
    if len(zones) == 1:
        return f"zonal (zone {zones[0]})"
    return f"zone-redundant ({', '.join(zones)})"


# -- public IP -----------------------------------------------------------------------------------

def network_id(subscription: str, resource_group: str, kind: str, name: str) -> str:
    """The ARM ID of a Microsoft.Network resource (``publicIPAddresses``, ``virtualNetworks``, ...)."""
    return f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Network/{kind}/{name}"


def public_ip_body(*, location: str, zones: Sequence[str]) -> dict[str, Any]:
    """A Standard, static, regional IPv4 public IP in ``zones`` (none: ``zones`` key left out)."""
    body: dict[str, Any] = {
        "location": normalize_region(location),
        "sku": {"name": STANDARD, "tier": REGIONAL},
        "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
    }
    if zones:
        body["zones"] = list(zones)
    return body


def _sku(body: Mapping[str, Any]) -> tuple[str, str]:
    sku = body.get("sku") or {}
    return str(sku.get("name") or "Basic"), str(sku.get("tier") or REGIONAL)


def _check_location(body: Mapping[str, Any], location: str, what: str) -> None:
    have = normalize_region(str(body.get("location") or ""))
    if have and have != normalize_region(location):
        raise errors.CloudZonesError(f"{what} already exists in {have}, not {normalize_region(location)}")


def plan_public_ip(existing: Mapping[str, Any] | None, *, name: str, location: str,
                   zones: Sequence[str]) -> Change:
    """What ensuring public IP ``name`` in ``zones`` takes; refuses to change an existing IP's zones or SKU."""
    detail = f"Standard, static, {describe_zones(zones)}"
    if existing is None:
        return Change("publicIPAddress", name, "create", detail, body=public_ip_body(location=location, zones=zones))
    what = f"public IP {name!r}"
    sku, tier = _sku(existing)
    if sku != STANDARD:
        raise errors.CloudZonesError(
            f"{what} already exists with SKU {sku}; availability zones need Standard and an existing IP cannot"
            " gain zones: delete it or choose another name")
    if tier != REGIONAL:
        raise errors.CloudZonesError(f"{what} is a {tier}-tier IP; a regional load balancer needs a Regional one")
    _check_location(existing, location, what)
    have = tuple(sorted((str(z) for z in existing.get("zones") or ()), key=lambda z: (len(z), z)))
    if set(have) != set(zones):
        raise errors.CloudZonesError(
            f"{what} already exists with {describe_zones(have)}, not {describe_zones(zones)}; Azure does not let"
            " the zones of a public IP change after creation (zones are immutable): delete and recreate it, or"
            " choose another name")
    allocation = str((existing.get("properties") or {}).get("publicIPAllocationMethod") or "")
    if allocation != "Static":
        body = _writable(existing)
        body.setdefault("properties", {})["publicIPAllocationMethod"] = "Static"
        return Change("publicIPAddress", name, "update", f"allocation {allocation or 'unset'} -> Static",
                      body=body, etag=str(existing.get("etag") or ""), current=existing)
    return Change("publicIPAddress", name, "none", detail, current=existing)


# -- load balancer -------------------------------------------------------------------------------

def _writable(body: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of an ARM body without the read-only bookkeeping ARM adds (states, etags, GUIDs)."""

    def clean(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items() if k not in _READ_ONLY}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return copy.deepcopy(value)

    result: dict[str, Any] = clean(body)
    return result


def _pool_body(pool: BackendPool) -> dict[str, Any]:
    if pool.addresses is None:
        return {"name": pool.name, "properties": {}}
    return {"name": pool.name, "properties": {"loadBalancerBackendAddresses": [
        {"name": a.name, "properties": {"ipAddress": a.ip, "virtualNetwork": {"id": pool.virtual_network}}}
        for a in pool.addresses]}}


def _addresses_by_name(entries: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    result = {}
    for entry in entries:
        props = entry.get("properties") or {}
        vnet = str((props.get("virtualNetwork") or {}).get("id") or "").lower()
        result[str(entry.get("name") or "")] = (str(props.get("ipAddress") or ""), vnet)
    return result


def _ensure_frontends(props: dict[str, Any], public_ip_ids: Sequence[str], lb: str) -> list[str]:
    frontends = props.setdefault("frontendIPConfigurations", [])
    changes = []
    for pip in public_ip_ids:
        if any(str(((f.get("properties") or {}).get("publicIPAddress") or {}).get("id") or "").lower() == pip.lower()
               for f in frontends):
            continue
        name = pip.rstrip("/").rsplit("/", 1)[-1]
        clash = next((f for f in frontends if str(f.get("name") or "").lower() == name.lower()), None)
        if clash is not None:
            other = ((clash.get("properties") or {}).get("publicIPAddress") or {}).get("id") or "a private address"
            raise errors.CloudZonesError(
                f"frontend {name!r} of load balancer {lb!r} already points at {other}, not {pip}; refusing to move it")
        frontends.append({"name": name, "properties": {"publicIPAddress": {"id": pip}}})
        changes.append(f"add frontend {name}")
    return changes


def _ensure_pool(props: dict[str, Any], pool: BackendPool, lb: str) -> list[str]:
    pools = props.setdefault("backendAddressPools", [])
    found = next((p for p in pools if str(p.get("name") or "").lower() == pool.name.lower()), None)
    if found is None:
        pools.append(_pool_body(pool))
        count = "" if pool.addresses is None else f" with {len(pool.addresses)} address(es)"
        return [f"add backend pool {pool.name}{count}"]
    if pool.addresses is None:
        return []
    pool_props = found.setdefault("properties", {})
    if pool_props.get("backendIPConfigurations") and pool.addresses:
        raise errors.CloudZonesError(
            f"backend pool {pool.name!r} of load balancer {lb!r} already has NIC-based members; Azure does not mix"
            " them with IP-based ones: use another pool name, or leave vnetName out to keep NIC-based membership")
    wanted = _pool_body(pool)["properties"]["loadBalancerBackendAddresses"]
    have = _addresses_by_name(pool_props.get("loadBalancerBackendAddresses") or [])
    want = _addresses_by_name(wanted)
    if have == want:
        return []
    pool_props["loadBalancerBackendAddresses"] = wanted
    parts = [f"add {n}" for n in sorted(want.keys() - have.keys())]
    parts += [f"change {n}" for n in sorted(want.keys() & have.keys()) if want[n] != have[n]]
    parts += [f"remove {n}" for n in sorted(have.keys() - want.keys())]
    return [f"backend pool {pool.name}: " + ", ".join(parts)]


def plan_load_balancer(existing: Mapping[str, Any] | None, *, name: str, location: str,
                       public_ip_ids: Sequence[str], pool: BackendPool) -> Change:
    """What ensuring Standard load balancer ``name`` takes: one frontend per public IP, and ``pool``.

    An existing load balancer keeps everything else it has (rules, probes, other frontends and
    pools): only what is missing is added, and the pool's addresses replaced when they differ.
    """
    if not public_ip_ids:
        raise errors.ConfigError(f"load balancer {name!r} needs at least one public IP for its frontend")
    if existing is None:
        body: dict[str, Any] = {"location": normalize_region(location), "sku": {"name": STANDARD, "tier": REGIONAL},
                                "properties": {"frontendIPConfigurations": [], "backendAddressPools": []}}
        _ensure_frontends(body["properties"], public_ip_ids, name)
        _ensure_pool(body["properties"], pool, name)
        count = "" if pool.addresses is None else f", {len(pool.addresses)} pool address(es)"
        return Change("loadBalancer", name, "create",
                      f"Standard, {len(public_ip_ids)} frontend(s), backend pool {pool.name}{count}", body=body)
    sku, _tier = _sku(existing)
    if sku != STANDARD:
        raise errors.CloudZonesError(
            f"load balancer {name!r} already exists with SKU {sku}; availability zones need Standard and Azure"
            " cannot change a load balancer's SKU in place: delete it or choose another name")
    _check_location(existing, location, f"load balancer {name!r}")
    body = _writable(existing)
    props = body.setdefault("properties", {})
    changes = _ensure_frontends(props, public_ip_ids, name) + _ensure_pool(props, pool, name)
    if not changes:
        return Change("loadBalancer", name, "none", f"Standard, backend pool {pool.name} up to date", current=existing)
    return Change("loadBalancer", name, "update", "; ".join(changes), body=body,
                  etag=str(existing.get("etag") or ""), current=existing)
