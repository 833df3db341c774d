"""Public IPs and load balancers through azure-mgmt-network (the only module importing it).

``ensure_*`` read the resource, let `lb_plan` decide, and PUT only when something must change, so
a second call costs one GET. An update sends the ETag it read as ``If-Match``: if something else
(cloud-provider-azure's service controller, say) changed the load balancer meanwhile, ARM answers
412 instead of us overwriting its edit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from azure.core.exceptions import AzureError
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.network import models as network_models

from cloudzones import errors
from providers.azure import arm, lb_plan
from providers.azure.lb_members import backend_pool_members

__all__ = ["LoadBalancer", "NetworkApi", "PublicIp", "backend_pool_members", "ensure_load_balancer",
           "ensure_public_ip", "plan_load_balancer", "plan_public_ip"]


@dataclasses.dataclass(frozen=True, slots=True)
class PublicIp:
    """A public IP as the load balancer plan needs it."""

    id: str
    name: str
    location: str
    zones: tuple[str, ...]
    sku: str
    allocation: str
    ip_address: str
    provisioning_state: str

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> PublicIp:
        """From an ARM JSON body."""
        props = body.get("properties") or {}
        return cls(id=str(body.get("id") or ""), name=str(body.get("name") or ""),
                   location=str(body.get("location") or ""), zones=tuple(str(z) for z in body.get("zones") or ()),
                   sku=str((body.get("sku") or {}).get("name") or ""),
                   allocation=str(props.get("publicIPAllocationMethod") or ""),
                   ip_address=str(props.get("ipAddress") or ""),
                   provisioning_state=str(props.get("provisioningState") or ""))


@dataclasses.dataclass(frozen=True, slots=True)
class LoadBalancer:
    """A load balancer's identity, SKU, frontends (name → public IP ID) and pools (name → address count)."""

    id: str
    name: str
    location: str
    sku: str
    frontends: dict[str, str]
    pools: dict[str, int]
    provisioning_state: str

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> LoadBalancer:
        """From an ARM JSON body."""
        props = body.get("properties") or {}
        frontends = {str(f.get("name") or ""): str(((f.get("properties") or {}).get("publicIPAddress") or {})
                                                   .get("id") or "")
                     for f in props.get("frontendIPConfigurations") or []}
        pools = {str(p.get("name") or ""): len((p.get("properties") or {}).get("loadBalancerBackendAddresses") or [])
                 for p in props.get("backendAddressPools") or []}
        return cls(id=str(body.get("id") or ""), name=str(body.get("name") or ""),
                   location=str(body.get("location") or ""), sku=str((body.get("sku") or {}).get("name") or ""),
                   frontends=frontends, pools=pools, provisioning_state=str(props.get("provisioningState") or ""))


_MODELS = (network_models.PublicIPAddress, network_models.LoadBalancer)
"""What the SDK hands back for the resources read here (a body that is not an object comes back as itself)."""


class NetworkApi(arm.ArmApi):
    """Public IP and load balancer reads and writes for one subscription, gated, counted, bounded."""

    client_class = NetworkManagementClient

    def get_public_ip(self, resource_group: str, name: str) -> dict[str, Any] | None:
        """The public IP's ARM body, or None when it does not exist."""
        return self._get(f"get public IP {resource_group}/{name}",
                         lambda: self.client.public_ip_addresses.get(resource_group, name))

    def get_load_balancer(self, resource_group: str, name: str) -> dict[str, Any] | None:
        """The load balancer's ARM body, or None when it does not exist."""
        return self._get(f"get load balancer {resource_group}/{name}",
                         lambda: self.client.load_balancers.get(resource_group, name))

    def put_public_ip(self, resource_group: str, name: str, body: Mapping[str, Any], *, timeout: float,
                      etag: str = "") -> dict[str, Any]:
        """PUT a public IP and wait (bounded) for the long-running operation."""
        return self._put(f"create or update public IP {resource_group}/{name}", etag, timeout,
                         lambda **kw: self.client.public_ip_addresses.begin_create_or_update(
                             resource_group, name, network_models.PublicIPAddress(dict(body)), **kw))

    def put_load_balancer(self, resource_group: str, name: str, body: Mapping[str, Any], *, timeout: float,
                          etag: str = "") -> dict[str, Any]:
        """PUT a load balancer and wait (bounded) for the long-running operation."""
        return self._put(f"create or update load balancer {resource_group}/{name}", etag, timeout,
                         lambda **kw: self.client.load_balancers.begin_create_or_update(
                             resource_group, name, network_models.LoadBalancer(dict(body)), **kw))

    def _get(self, action: str, fn: Callable[[], Any]) -> dict[str, Any] | None:
        return self._find(action, lambda: dict(arm.expect(fn(), _MODELS).as_dict()))

    def _put(self, action: str, etag: str, timeout: float, begin: Callable[..., Any]) -> dict[str, Any]:
        options = {"headers": {"If-Match": etag}} if etag else {}
        with arm.reading(action):
            try:
                model = begin(**options).result(timeout=timeout)
            except AzureError as exc:
                if getattr(exc, "status_code", None) == 412:
                    arm.raise_cloud_error(exc, f"{action} (it changed since it was read; run again)")
                arm.raise_cloud_error(exc, action)
            return dict(arm.expect(model, _MODELS).as_dict())


def plan_public_ip(api: NetworkApi, *, resource_group: str, location: str, name: str,
                   zones: str | Sequence[str] | None = None,
                   region_zones: Sequence[str] = lb_plan.DEFAULT_REGION_ZONES) -> lb_plan.Change:
    """Read public IP ``name`` and say what ensuring it takes (reads only)."""
    wanted = lb_plan.resolve_zones(zones, region=location, region_zones=region_zones)
    return lb_plan.plan_public_ip(api.get_public_ip(resource_group, name), name=name, location=location,
                                  zones=wanted)


def plan_load_balancer(api: NetworkApi, *, resource_group: str, location: str, name: str,
                       frontend_ip: str | Sequence[str], backend_pool: str | lb_plan.BackendPool) -> lb_plan.Change:
    """Read load balancer ``name`` and say what ensuring it takes (reads only).

    ``frontend_ip`` is one public IP (or several), each an ARM ID or a name in ``resource_group``;
    ``backend_pool`` a pool name (members left alone) or a `lb_plan.BackendPool`.
    """
    pool = lb_plan.BackendPool(backend_pool) if isinstance(backend_pool, str) else backend_pool
    asked = [frontend_ip] if isinstance(frontend_ip, str) else list(frontend_ip)
    ids = [ip if ip.startswith("/") else lb_plan.network_id(api.subscription_id, resource_group,
                                                            "publicIPAddresses", ip) for ip in asked]
    if not ids:
        raise errors.ConfigError(f"load balancer {name!r} needs at least one public IP for its frontend")
    return lb_plan.plan_load_balancer(api.get_load_balancer(resource_group, name), name=name, location=location,
                                      public_ip_ids=ids, pool=pool)


def apply(api: NetworkApi, change: lb_plan.Change, *, resource_group: str, timeout: float) -> dict[str, Any]:
    """Carry out a planned change (a PUT unless the action is ``none``); returns the resource's body."""
    if change.body is None:
        return dict(change.current or {})
    put = api.put_public_ip if change.resource == "publicIPAddress" else api.put_load_balancer
    return put(resource_group, change.name, change.body, timeout=timeout, etag=change.etag)


def ensure_public_ip(api: NetworkApi, *, resource_group: str, location: str, name: str,
                     zones: str | Sequence[str] | None = None,
                     region_zones: Sequence[str] = lb_plan.DEFAULT_REGION_ZONES,
                     timeout: float) -> tuple[PublicIp, str]:
    """A Standard static public IP, zone-redundant unless one zone is given; returns ``(ip, action)``.

    ``action`` is ``create``, ``update`` or ``none``. An existing IP in other zones (or Basic) is
    refused: Azure cannot change a public IP's zones after creation.
    """
    change = plan_public_ip(api, resource_group=resource_group, location=location, name=name, zones=zones,
                            region_zones=region_zones)
    return PublicIp.from_body(apply(api, change, resource_group=resource_group, timeout=timeout)), change.action


def ensure_load_balancer(api: NetworkApi, *, resource_group: str, location: str, name: str,
                         frontend_ip: str | Sequence[str], backend_pool: str | lb_plan.BackendPool,
                         timeout: float) -> tuple[LoadBalancer, str]:
    """A Standard load balancer with one frontend per public IP and ``backend_pool``; ``(lb, action)``."""
    change = plan_load_balancer(api, resource_group=resource_group, location=location, name=name,
                                frontend_ip=frontend_ip, backend_pool=backend_pool)
    return LoadBalancer.from_body(apply(api, change, resource_group=resource_group, timeout=timeout)), change.action
