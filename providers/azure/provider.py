"""`AzureProvider`: a node's topology from IMDS (this machine) or from ARM (any node), within a call budget.

Scale-set instances are resolved from one cached list per scale set (not one GET per node),
standalone and flexible-VMSS VMs from a cached GET or the resource group's VM list; a cache miss
refreshes once. The `ThrottleGate` turns a 429 into fast failures until ``Retry-After`` passes.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from azure.core.credentials import TokenCredential

from cloudzones import errors
from cloudzones.cache import TtlCache
from cloudzones.topology import Topology, make_zone, normalize_region
from providers import metadata
from providers.azure import arm, credentials, disks, imds, lb_plan, resource_ids
from providers.azure.compute import ComputeApi, Disk, Instance, ScaleSet
from providers.azure.config import AzureConfig
from providers.azure.throttle import ArmCalls, ThrottleGate

if TYPE_CHECKING:
    # Imported when first used: azure-mgmt-network costs every process ~30 MB, and only the
    # load-balancer commands need it.
    from providers.azure import network as networking

log = logging.getLogger(__name__)

ApiT = TypeVar("ApiT")

_MIN_FORCED_REFRESH = 2.0
"""Seconds a freshly fetched list is trusted even on a miss: a burst of unknown nodes costs one relist."""


def topology_of(instance: Instance, what: str) -> Topology:
    """The topology ARM reports for a VM: ``zones[0]`` in the VM's own location, else its fault domain."""
    region = normalize_region(instance.location)
    fault_domain = None if instance.fault_domain is None else str(instance.fault_domain)
    if not region:
        raise errors.ZoneUnavailable(f"{what} has no location in ARM")
    if instance.zones:
        try:
            zone = make_zone(region, instance.zones[0])
        except errors.InvalidZone as exc:
            raise errors.InvalidZone(f"{what} reports zones {list(instance.zones)!r}: not an integer zone id") from exc
        return Topology(region, zone, fault_domain)
    if fault_domain is not None:
        return Topology(region, fault_domain, fault_domain)
    raise errors.ZoneUnavailable(f"{what} reports neither a zone nor a fault domain yet")


class AzureProvider:
    """Zone detection on Azure: `local_topology` from IMDS, the rest through ARM."""

    name = "azure"

    def __init__(self, config: AzureConfig, *, credential: TokenCredential | None = None,
                 imds_url: str = imds.DEFAULT_URL, resource_manager_url: str | None = None,
                 arm_settings: arm.ArmSettings | None = None,
                 metadata_settings: metadata.MetadataSettings | None = None,
                 transport: Any = None, connection_verify: Any = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self.config = config
        self._credential = credential
        self._imds_url = imds_url
        self._base_url, self._scopes = arm.endpoints(
            config.cloud, resource_manager_url or config.resource_manager_endpoint or None)
        self._arm_settings = arm_settings or arm.ArmSettings()
        self._transport, self._verify = transport, connection_verify
        self._clock, self._sleep = clock, sleep
        self._metadata = metadata.MetadataClient(service="Azure IMDS", settings=metadata_settings,
                                                 clock=clock, sleep=sleep, rand=rand)
        self.gate = ThrottleGate(clock=clock, default_wait=self._arm_settings.default_throttle)
        self._apis: dict[tuple[Callable[..., Any], str], Any] = {}
        self._apis_lock = threading.Lock()
        self._vms: TtlCache[tuple[str, str, str], Instance | None] = TtlCache(ttl=config.vm_cache_ttl, clock=clock)
        self._vmss_vms: TtlCache[tuple[str, str, str], dict[str, Instance] | None] = TtlCache(
            ttl=config.vmss_cache_ttl, clock=clock)
        self._groups: TtlCache[tuple[str, str, str], list[Any]] = TtlCache(ttl=config.vmss_cache_ttl, clock=clock)

    def __repr__(self) -> str:
        return f"AzureProvider(subscription_id={self.config.subscription_id!r}, location={self.config.location!r})"

    @property
    def arm_calls(self) -> ArmCalls:
        """Requests sent to ARM so far (and calls the throttle gate refused)."""
        return self.gate.calls

    # -- this machine -------------------------------------------------------------------------

    def local_topology(self) -> Topology:
        """This VM's topology from IMDS (proxy-free, bounded: `MetadataError` within seconds off Azure)."""
        return imds.topology_from_imds(imds.fetch_instance_metadata(self._metadata, imds_url=self._imds_url))

    # -- ARM ------------------------------------------------------------------------------------

    def compute(self, subscription_id: str | None = None) -> ComputeApi:
        """The compute client for a subscription (the configured one by default)."""
        return self._client_for(ComputeApi, subscription_id)

    def network(self, subscription_id: str | None = None) -> networking.NetworkApi:
        """The network client for a subscription (the configured one by default), sharing the throttle gate."""
        from providers.azure import network as networking

        return self._client_for(networking.NetworkApi, subscription_id)

    def check_arm_settings(self) -> None:
        """Raise `ConfigError` now if ARM calls cannot work (no subscription, no credentials): services call this
        at start-up, so that a broken cloud config stops them instead of failing every reconcile while healthy."""
        if not self.config.subscription_id:
            raise errors.ConfigError("no subscriptionId in the cloud config; ARM calls need one")
        with self._apis_lock:
            if self._credential is None:
                self._credential = credentials.build_credential(self.config)

    def check_disk_settings(self) -> None:
        """`check_arm_settings`, and the resource group and location that creating disks needs (the provisioner)."""
        self.check_arm_settings()
        self._group()
        self._location()

    def _client_for(self, kind: Callable[..., ApiT], subscription_id: str | None) -> ApiT:
        # One client per (kind, subscription), all sharing this provider's credential and throttle gate.
        sub = subscription_id or self.config.subscription_id
        if not sub:
            raise errors.ConfigError("no subscriptionId in the cloud config; ARM calls need one")
        with self._apis_lock:
            api = self._apis.get((kind, sub.lower()))
            if api is None:
                if self._credential is None:
                    self._credential = credentials.build_credential(self.config)
                api = kind(self._credential, sub, gate=self.gate, base_url=self._base_url,
                           credential_scopes=self._scopes, settings=self._arm_settings, sleep=self._sleep,
                           transport=self._transport, connection_verify=self._verify)
                self._apis[(kind, sub.lower())] = api
        return cast(ApiT, api)

    def topology_by_provider_id(self, provider_id: str, *,
                                on_busy: Callable[[], object] | None = None) -> Topology | None:
        """The topology of the node with this ``spec.providerID``; None when Azure does not manage it.

        ``on_busy``: when the node's scale set is being listed by another thread, raise
        `errors.FetchInProgress` and call ``on_busy()`` once the list is in, rather than wait for it.
        """
        parsed = resource_ids.parse_provider_id(provider_id)
        if parsed is None:
            return None
        if parsed.is_scale_set_instance:
            return self._scale_set_topology(parsed.subscription, parsed.resource_group, parsed.scale_set,
                                            lambda vms: vms.get(parsed.instance_id), provider_id, on_busy=on_busy)
        return self._vm_topology(parsed.subscription, parsed.resource_group, parsed.name, provider_id)

    def topology_by_node_name(self, node_name: str) -> Topology:
        """The topology of the node named ``node_name`` (a VMSS computer name, or a VM's computer name)."""
        name = node_name.lower()
        sub, group = self.config.subscription_id, self.config.resource_group
        if not group:
            raise errors.ConfigError("no resourceGroup in the cloud config; node-name lookups need one")
        if self.config.vm_type == "vmss":
            scale_set = self._uniform_scale_set_for(sub, group, name)
            if scale_set is not None:
                return self._scale_set_topology(sub, group, scale_set.name,
                                                lambda vms: vms.get(f"name:{name}"), node_name)
        instance = self._group_vm(sub, group, name)
        if instance is None:
            raise errors.NodeNotFound(f"no VM or scale-set instance named {node_name!r} in resource group {group!r}")
        return self._vm_topology(sub, group, instance.name, node_name)

    # -- resolution helpers ---------------------------------------------------------------------

    def _scale_set_topology(self, sub: str, group: str, scale_set: str,
                            pick: Callable[[dict[str, Instance]], Instance | None], what: str, *,
                            on_busy: Callable[[], object] | None = None) -> Topology:
        key = (sub.lower(), group.lower(), scale_set.lower())

        def fetch() -> dict[str, Instance] | None:
            listed = self.compute(sub).list_scale_set_vms(group, scale_set)
            if listed is None:
                return None
            index = {vm.instance_id: vm for vm in listed}
            index.update({f"name:{vm.computer_name}": vm for vm in listed})
            return index

        vms = self._vmss_vms.get(key, fetch, on_busy=on_busy)
        found = pick(vms) if vms else None
        if found is None and self._may_force(self._vmss_vms, key):
            vms = self._vmss_vms.get(key, fetch, force=True)
            found = pick(vms) if vms else None
        if found is None:
            raise errors.NodeNotFound(f"{what}: no such instance in scale set {group}/{scale_set}")
        try:
            return topology_of(found, f"scale-set instance {what}")
        except errors.ZoneUnavailable:
            # New instances may not report a zone yet: refetch next time (kubernetes #83933).
            self._vmss_vms.delete(key)
            raise

    def _vm_topology(self, sub: str, group: str, vm_name: str, what: str) -> Topology:
        key = (sub.lower(), group.lower(), vm_name.lower())
        found = self._vms.get(key, lambda: self.compute(sub).get_vm(group, vm_name))
        if found is None:
            self._vms.delete(key)  # a VM that is not there yet may appear soon
            raise errors.NodeNotFound(f"{what}: no VM {vm_name!r} in resource group {group!r}")
        try:
            return topology_of(found, f"VM {what}")
        except errors.ZoneUnavailable:
            self._vms.delete(key)
            raise

    def _group_listing(self, sub: str, group: str, kind: str, *, force: bool = False) -> list[Any]:
        api = self.compute(sub)
        fetch: Callable[[], list[Any]] = (
            (lambda: api.list_scale_sets(group)) if kind == "scale-sets" else (lambda: api.list_vms(group)))
        return self._groups.get((sub.lower(), group.lower(), kind), fetch, force=force)

    def _uniform_scale_set_for(self, sub: str, group: str, name: str) -> ScaleSet | None:
        try:
            prefix = resource_ids.vmss_computer_name_prefix(name)
        except errors.InvalidResourceId:
            return None

        def match(sets: list[ScaleSet]) -> ScaleSet | None:
            return next((s for s in sets if s.uniform and s.computer_name_prefix == prefix), None)

        found = match(self._group_listing(sub, group, "scale-sets"))
        if found is None and self._may_force(self._groups, (sub.lower(), group.lower(), "scale-sets")):
            found = match(self._group_listing(sub, group, "scale-sets", force=True))
        return found

    def _group_vm(self, sub: str, group: str, name: str) -> Instance | None:
        def match(vms: list[Instance]) -> Instance | None:
            return next((vm for vm in vms if name in (vm.computer_name, vm.name.lower())), None)

        found = match(self._group_listing(sub, group, "vms"))
        if found is None and self._may_force(self._groups, (sub.lower(), group.lower(), "vms")):
            found = match(self._group_listing(sub, group, "vms", force=True))
        return found

    # -- disks ------------------------------------------------------------------------------------

    def ensure_disk(self, name: str, size_gib: int, sku: str, zone: str | None,
                    tags: Mapping[str, str] | None = None) -> tuple[Disk, bool]:
        """Create the managed disk ``name`` in the configured group, or find it; returns ``(disk, created)``."""
        return disks.ensure_disk(self.compute(), resource_group=self._group(), location=self._location(), name=name,
                                 size_gib=size_gib, sku=sku, zone=zone, tags=tags or {},
                                 timeout=self._arm_settings.polling_timeout)

    def get_disk(self, name: str) -> Disk | None:
        """The managed disk ``name`` in the configured group, or None."""
        return self.compute().get_disk(self._group(), name)

    def delete_disk(self, name: str) -> bool:
        """Delete the managed disk ``name``; False when already gone; refuses attached disks."""
        return disks.delete_disk(self.compute(), resource_group=self._group(), name=name,
                                 timeout=self._arm_settings.polling_timeout)

    def delete_volume_disk(self, pv: Mapping[str, Any]) -> bool:
        """Delete the managed disk behind ``pv`` if it lives in the configured subscription and group."""
        uri = disks.volume_disk_uri(pv)
        if not uri:
            name = (pv.get("metadata") or {}).get("name")
            raise errors.CloudZonesError(f"PersistentVolume {name!r} has no Azure managed disk")
        parsed = disks.check_subscription(uri, self.config.subscription_id)
        if not parsed.same_group(self._group()):
            raise errors.CloudZonesError(f"disk {uri!r} is outside resource group {self._group()!r}; not deleting it")
        return self.delete_disk(parsed.name)

    def labels_for_volume(self, pv: Mapping[str, Any]) -> dict[str, str]:
        """Topology labels for a PV backed by an Azure managed disk; ``{}`` for other PVs and placeholders."""
        uri = disks.volume_disk_uri(pv)
        if uri is None:
            return {}
        parsed = disks.check_subscription(uri, self.config.subscription_id)
        disk = self.compute(parsed.subscription).get_disk(parsed.resource_group, parsed.name)
        if disk is None:
            raise errors.CloudApiError(f"disk {uri!r} does not exist", status=404)
        return disks.labels_for_disk(disk)

    # -- load balancer ----------------------------------------------------------------------------

    def ensure_public_ip(self, name: str, *, zones: str | Sequence[str] | None = None,
                         region_zones: Sequence[str] = lb_plan.DEFAULT_REGION_ZONES) -> tuple[networking.PublicIp, str]:
        """A Standard static public IP in the configured group, zone-redundant by default; ``(ip, action)``."""
        from providers.azure import network as networking

        return networking.ensure_public_ip(self.network(), resource_group=self._group(), location=self._location(),
                                           name=name, zones=zones, region_zones=region_zones,
                                           timeout=self._arm_settings.polling_timeout)

    def ensure_load_balancer(self, name: str, *, frontend_ip: str | Sequence[str],
                             backend_pool: str | lb_plan.BackendPool) -> tuple[networking.LoadBalancer, str]:
        """A Standard load balancer in the configured group, one frontend per public IP; ``(lb, action)``."""
        from providers.azure import network as networking

        return networking.ensure_load_balancer(self.network(), resource_group=self._group(),
                                               location=self._location(), name=name, frontend_ip=frontend_ip,
                                               backend_pool=backend_pool, timeout=self._arm_settings.polling_timeout)

    def _group(self) -> str:
        if not self.config.resource_group:
            raise errors.ConfigError("no resourceGroup in the cloud config; disk and network operations need one")
        return self.config.resource_group

    def _location(self) -> str:
        if not self.config.location:
            raise errors.ConfigError("no location in the cloud config; creating disks and network resources needs one")
        return self.config.location

    @staticmethod
    def _may_force(cache: TtlCache[Any, Any], key: Any) -> bool:
        age = cache.age(key)
        return age is None or age >= _MIN_FORCED_REFRESH


def provider_from_options(*, cloud_config: str | None = None, config: Mapping[str, Any] | None = None,
                          **options: Any) -> AzureProvider:
    """Build an `AzureProvider` from a cloud-config path or mapping (an empty config allows IMDS only)."""
    parsed = AzureConfig.load(cloud_config) if cloud_config else AzureConfig.from_mapping(config or {})
    return AzureProvider(parsed, **options)
