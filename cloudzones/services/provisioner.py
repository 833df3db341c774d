"""The zoned-disk provisioner service: claims in, Azure managed disks and pre-bound PVs out, and back.

It behaves as sig-storage-lib-external-provisioner does, on `storageclass.Provisioner` (the one
zone-choice path): informers on claims, StorageClasses, nodes and PVs (active zones come from the
node cache, never a list per claim); a deduplicating work queue with per-key backoff; only the
Lease holder writes. A claim whose ``storage-provisioner`` annotation names us gets a disk named
``pvc-<uid>`` (create-or-get) and a PV with that name pre-bound to it (``claimRef`` with uid),
which kube-controller-manager's binder then binds. A crash between the two is harmless: the disk
is found again, a PV already there is adopted. A Released ``Delete`` PV of ours loses its disk
(refused while ARM says it is attached, and retried), then our finalizer, then its object.
Refusals become one ``ProvisioningFailed`` Event per distinct failure, naming the rule.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from cloudzones import errors, kube, labels, nodelabels
from cloudzones.kube import events, informer
from cloudzones.retry import RetryPolicy
from cloudzones.services import claims
from cloudzones.services.claims import Claim
from cloudzones.services.workers import Workers
from storageclass import Provisioner, parameters, zonelabel
from storageclass.zones import Mode

log = logging.getLogger(__name__)

_PROVISION_ERRORS = (errors.CloudZonesError,)
"""Every refusal of the library and the provider is one of ours; anything else is a bug."""


@dataclasses.dataclass(frozen=True)
class ProvisionerSettings:
    """How the provisioner service behaves."""

    name: str = parameters.CLOUDZONES_PROVISIONER
    """The provisioner name StorageClasses use, and the ``provisioned-by`` of the PVs we make."""
    workers: int = 4
    """Claims and volumes handled at once (each one waits on ARM for a disk create or delete)."""
    retry: RetryPolicy = RetryPolicy(base=1.0, cap=300.0)
    """When a claim or volume that failed is tried again (an ARM ``Retry-After`` is the floor)."""
    mode: Mode = "balanced"
    """Round-robin over zones: ``balanced`` (spreads StatefulSets evenly) or ``kubernetes`` (the in-tree choice)."""
    csi: bool = False
    """Write the ``disk.csi.azure.com`` PV form instead of the in-tree ``azureDisk`` one."""
    informer: informer.InformerSettings = dataclasses.field(default_factory=informer.InformerSettings)


class ProvisionerMetrics:
    """Prometheus metrics of one provisioner."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.provisioned = Counter("cloudzones_volumes_provisioned", "PersistentVolumes created for claims",
                                   registry=registry)
        self.deleted = Counter("cloudzones_volumes_deleted", "Disks deleted for released volumes", registry=registry)
        self.failures = Counter("cloudzones_provisioning_failures", "Provisioning or deletion attempts that failed",
                                ["reason"], registry=registry)
        self.queue_depth = Gauge("cloudzones_provisioner_queue_depth", "Claims and volumes waiting",
                                 registry=registry)
        self.arm_calls = Gauge("cloudzones_arm_calls", "Requests sent to Azure Resource Manager", registry=registry)


class DiskProvisioner(Workers):
    """Provision zoned managed disks for the claims that name us, and delete them when released."""

    def __init__(self, client: kube.KubeClient, provider: Any, *, settings: ProvisionerSettings | None = None,
                 registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random) -> None:
        self.client, self.provider = client, provider
        self.settings = settings or ProvisionerSettings()
        self.library = Provisioner(provider, mode=self.settings.mode, csi=self.settings.csi,
                                   provisioners=parameters.AZURE_DISK_PROVISIONERS | {self.settings.name})
        super().__init__(self.settings.retry, name="provisioner", clock=clock, rand=rand)
        self.metrics = ProvisionerMetrics(registry or CollectorRegistry())
        self.events = events.EventRecorder(client, component=self.settings.name)
        """Events go out from their own thread (as client-go's recorder sends them): workers never wait."""
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        if getattr(provider, "arm_calls", None) is not None:
            self.metrics.arm_calls.set_function(lambda: provider.arm_calls.total)
        self.config_problem = ""
        """The last failure no retry can fix (ARM refusing our credentials), until an ARM call succeeds."""
        self._failing: dict[str, str] = {}
        self._announced: set[str] = set()
        self._disks_gone: set[str] = set()
        self._zones: collections.Counter[str] = collections.Counter()
        self._node_zone: dict[str, str] = {}
        self._zones_lock = threading.Lock()
        # One Informer call per resource, kube.X spelled out: tests/test_deploy_manifests.py reads them for RBAC.
        timing, stop = self.settings.informer, self.stop_event
        self.claims: informer.Informer[dict[str, Any]] = informer.Informer(
            client, kube.PERSISTENT_VOLUME_CLAIMS, project=claims.project_claim, on_add=self._claim_changed,
            on_update=lambda old, new: self._claim_changed(new), settings=timing, stop=stop)
        self.volumes: informer.Informer[dict[str, Any]] = informer.Informer(
            client, kube.PERSISTENT_VOLUMES, project=claims.project_volume, on_add=self._volume_changed,
            on_update=lambda old, new: self._volume_changed(new), settings=timing, stop=stop,
            on_delete=lambda last: self._disks_gone.discard(last["metadata"].get("name", "")))
        self.classes: informer.Informer[dict[str, Any]] = informer.Informer(
            client, kube.STORAGE_CLASSES, project=claims.project_class, on_add=lambda _: self._retry_failing(),
            on_update=lambda old, new: self._retry_failing(), settings=timing, stop=stop)
        self.nodes: informer.Informer[dict[str, Any]] = informer.Informer(
            client, kube.NODES, project=_project_node, on_add=self._node_changed, settings=timing, stop=stop,
            on_update=lambda old, new: self._node_changed(new), on_delete=self._node_deleted)
        self._informers = (self.claims, self.volumes, self.classes, self.nodes)

    # -- informer callbacks (on the informers' threads: keep them short) ----------------------------

    def _claim_changed(self, pvc: dict[str, Any]) -> None:
        if claims.wants_provisioning(pvc, self.settings.name):
            meta = pvc["metadata"]
            self.queue.add(claims.claim_key(meta.get("namespace", ""), meta.get("name", "")))

    def _volume_changed(self, pv: dict[str, Any]) -> None:
        if not claims.volume_action(pv, self.settings.name).nothing:
            self.queue.add(claims.volume_key(pv["metadata"].get("name", "")))

    def _node_changed(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        zone = zonelabel.node_zone(node)[1]
        with self._zones_lock:
            previous = self._node_zone.get(name)
            if previous == zone:
                return
            if previous:
                self._zones[previous] -= 1
            self._node_zone[name] = zone
            if zone:
                self._zones[zone] += 1
        self._retry_failing()  # a new zone (or a labelled node) may be what a refused claim waited for

    def _node_deleted(self, node: dict[str, Any]) -> None:
        with self._zones_lock:
            previous = self._node_zone.pop(node["metadata"]["name"], "")
            if previous:
                self._zones[previous] -= 1

    def _retry_failing(self) -> None:
        for key in list(self._failing):
            if key.startswith("claim/"):
                self.queue.add(key)

    def active_zones(self) -> list[str]:
        """The zone labels nodes carry now (availability zones and fault domains; the rules sort them out)."""
        with self._zones_lock:
            return sorted(zone for zone, count in self._zones.items() if count > 0)

    # -- one claim ----------------------------------------------------------------------------------

    def reconcile(self, key: str) -> str:
        """Handle one queue key; says what happened (provisioned, adopted, deleted, skipped: <why>, retry)."""
        kind, _, rest = key.partition("/")
        if kind == "claim":
            return self.reconcile_claim(rest)
        if kind == "volume":
            return self.reconcile_volume(rest)
        return f"skipped: unknown key {key!r}"

    def reconcile_claim(self, namespaced: str) -> str:
        """Provision the claim ``namespace/name`` if it is ours and still needs a volume."""
        key = f"claim/{namespaced}"
        pvc = self.claims.get(namespaced)
        if pvc is None:
            self._forget(key)
            return "skipped: deleted"
        claim = Claim.of(pvc)
        if claim.provisioner != self.settings.name:
            return "skipped: not ours"
        if claim.bound:
            self._forget(key)
            return "skipped: bound"
        storage_class = self.classes.get(claim.storage_class)
        if storage_class is None:
            return self._failed(key, pvc, "StorageClassNotFound",
                                f"StorageClass {claim.storage_class!r} not found")
        if storage_class.get("provisioner") != self.settings.name:
            return f"skipped: StorageClass {claim.storage_class!r} belongs to {storage_class.get('provisioner')!r}"
        if claim.unsupported:
            return self._failed(key, pvc, "ProvisioningFailed", claim.unsupported)
        node = None
        if claims.waits_for_consumer(storage_class):
            if not claim.selected_node:
                return "skipped: waiting for the first consumer"
            node = self.nodes.get(claim.selected_node)
            if node is None:
                self._reschedule(claim)
                return self._failed(key, pvc, "ProvisioningFailed",
                                    f"selected node {claim.selected_node!r} does not exist")
        existing = self.volumes.get(claim.volume_name)
        if existing is not None and (existing["spec"].get("claimRef") or {}).get("uid") == claim.uid:
            self._succeeded(key)
            return "adopted"  # a PV of an earlier attempt: the binder will bind it
        if not self.active.is_set():
            return "skipped: not the leader"
        self._announce(key, pvc, claim)
        try:
            pv, choice = self.library.provision_explained(pvc, storage_class, active_zones=self.active_zones(),
                                                          selected_node=node)
        except _PROVISION_ERRORS as exc:
            rule = getattr(exc, "rule", None)
            if rule in claims.NODE_DEPENDENT_RULES and claim.selected_node:
                self._reschedule(claim)
            return self._failed(key, pvc, "ProvisioningFailed", str(exc), exc=exc)
        self.config_problem = ""
        claims.decorate_volume(pv, provisioner=self.settings.name)
        outcome = self._create_volume(key, pvc, claim, pv)
        if outcome == "provisioned":
            zones = ", ".join(choice.zones) or "no zone"
            self._event(pvc, "ProvisioningSucceeded", f"Successfully provisioned volume {claim.volume_name} "
                        f"({zones}; rule {choice.rule.value})", "Normal")
        return outcome

    def _create_volume(self, key: str, pvc: Mapping[str, Any], claim: Claim, pv: dict[str, Any]) -> str:
        try:
            self.client.create(kube.PERSISTENT_VOLUMES, pv)
        except errors.KubeAlreadyExists:
            try:
                found = self.client.get(kube.PERSISTENT_VOLUMES, claim.volume_name)
            except errors.KubeApiError as exc:
                return self._failed(key, pvc, "ProvisioningFailed", f"cannot read PersistentVolume "
                                    f"{claim.volume_name}: {exc}", exc=exc)
            if ((found.get("spec") or {}).get("claimRef") or {}).get("uid") != claim.uid:
                return self._failed(key, pvc, "ProvisioningFailed", f"PersistentVolume {claim.volume_name} exists "
                                    "but is bound to another claim")
            self._succeeded(key)
            return "adopted"
        except errors.KubeApiError as exc:
            return self._failed(key, pvc, "ProvisioningFailed", f"cannot create PersistentVolume "
                                f"{claim.volume_name}: {exc}", exc=exc)
        self.metrics.provisioned.inc()
        log.info("provisioned %s for claim %s/%s", claim.volume_name, claim.namespace, claim.name)
        self._succeeded(key)
        return "provisioned"

    def _announce(self, key: str, pvc: Mapping[str, Any], claim: Claim) -> None:
        if key not in self._announced:
            self._announced.add(key)
            self._event(pvc, "Provisioning", f"External provisioner is provisioning volume for claim "
                        f"\"{claim.namespace}/{claim.name}\"", "Normal")

    def _reschedule(self, claim: Claim) -> None:
        """Drop ``selected-node`` so the scheduler picks again (what external-provisioner does)."""
        if not self.active.is_set():
            return
        patch = {"metadata": {"annotations": {claims.ANN_SELECTED_NODE: None}}}
        try:
            self.client.patch(kube.PERSISTENT_VOLUME_CLAIMS, claim.name, patch, namespace=claim.namespace)
        except errors.KubeApiError as exc:
            log.warning("cannot remove %s from claim %s/%s: %s", claims.ANN_SELECTED_NODE, claim.namespace,
                        claim.name, exc)

    # -- one volume ---------------------------------------------------------------------------------

    def reconcile_volume(self, name: str) -> str:
        """Delete the disk of a released PV of ours (``Delete`` policy), then let the PV go."""
        key = claims.volume_key(name)
        pv = self.volumes.get(name)
        if pv is None:
            self._forget(key)
            return "skipped: deleted"
        action = claims.volume_action(pv, self.settings.name)
        if action.nothing:
            self._forget(key)
            return "skipped: nothing to do"
        if not self.active.is_set():
            return "skipped: not the leader"
        described = {"metadata": {"name": name}}
        if action.delete_disk and name not in self._disks_gone:
            try:
                gone = not self.provider.delete_volume_disk(pv)
            except errors.CloudZonesError as exc:
                return self._failed(key, described, "VolumeFailedDelete", f"cannot delete the disk of "
                                    f"PersistentVolume {name}: {exc}", exc=exc, kind="PersistentVolume")
            self.config_problem = ""
            self._disks_gone.add(name)  # our own finalizer removal comes back as an update: no second ARM call
            if not gone:
                self.metrics.deleted.inc()
            log.info("%s the disk of PersistentVolume %s", "found no" if gone else "deleted", name)
        try:
            removal = claims.finalizer_removal(pv) if action.remove_finalizer else None
            if removal is not None:
                self.client.patch(kube.PERSISTENT_VOLUMES, name, removal, patch_type="json")
            if action.delete_object:
                self.client.delete(kube.PERSISTENT_VOLUMES, name)
        except errors.KubeNotFound:
            pass
        except errors.KubeApiError as exc:
            # A stale finalizer position fails the patch's test: the next watch event brings it back.
            return self._failed(key, described, "VolumeFailedDelete", f"cannot release PersistentVolume {name}: "
                                f"{exc}", exc=exc, kind="PersistentVolume", event=False)
        self._succeeded(key)
        return "deleted" if action.delete_disk else "released"

    # -- outcomes -----------------------------------------------------------------------------------

    def _succeeded(self, key: str) -> None:
        self.retries.forget(key)
        self._failing.pop(key, None)
        self._announced.discard(key)

    def _forget(self, key: str) -> None:
        self._succeeded(key)

    def _failed(self, key: str, obj: Mapping[str, Any], reason: str, message: str, *, exc: Exception | None = None,
                kind: str = "PersistentVolumeClaim", event: bool = True) -> str:
        self.metrics.failures.labels(reason).inc()
        if isinstance(exc, errors.CloudApiError) and exc.status in (401, 403):
            self.config_problem = str(exc)
        delay = self.retries.schedule(key, retry_after=getattr(exc, "retry_after", None))
        log.warning("%s; trying again in %.0f s", message, delay)
        # One Event per distinct failure, not one per retry.
        if event and self.active.is_set() and self._failing.get(key) != message:
            self._event(obj, reason, message, "Warning", kind=kind)
        self._failing[key] = message
        return "retry"

    def _event(self, obj: Mapping[str, Any], reason: str, message: str, event_type: str, *,
               kind: str = "PersistentVolumeClaim") -> None:
        self.events.record(obj, reason=reason, message=message, kind=kind, event_type=event_type)

    def readiness(self) -> str:
        """``""`` when this replica can do its work; else why not (for ``/readyz``)."""
        waiting = [i.resource.plural for i in self._informers if isinstance(i.resource, kube.Resource)
                   and not i.synced.is_set()]
        if waiting:
            return f"informers have not finished their first list: {', '.join(waiting)}"
        if self.config_problem:
            return f"ARM refuses our credentials since the last success: {self.config_problem}"
        return ""

    # -- running ------------------------------------------------------------------------------------

    def ready_to_work(self) -> bool:
        """Every informer has its first list (a zone choice on a half-listed node cache would skew)."""
        return all(i.synced.is_set() for i in self._informers)

    def start_informers(self) -> None:
        """Start the four informers (workers wait for all of them)."""
        for each in self._informers:
            each.start()

    def start(self, *, leading: bool = True) -> None:
        """Start the informers, the workers and the retry timer; ``leading`` False waits for `set_leading`."""
        self.start_informers()
        if leading:
            self.set_leading(True)
        self.start_workers(self.settings.workers)

    def set_leading(self, leading: bool) -> None:
        """Act (and look at every claim and volume again) or pause."""
        if leading and not self.active.is_set():
            self.active.set()
            for pvc in [obj for _, obj in self.claims.items()]:
                self._claim_changed(pvc)
            for pv in [obj for _, obj in self.volumes.items()]:
                self._volume_changed(pv)
        elif not leading:
            self.pause()

    def stop(self) -> None:
        """Stop everything and wait for the threads."""
        self.stop_workers()
        for each in self._informers:
            each.stop()
        self.events.close()


_NODE_KEYS = nodelabels.MANAGED_KEYS | {labels.CSI_DISK_ZONE}


def _project_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """A node's name and topology labels: what the zone rules read (heartbeats leave it unchanged)."""
    meta = node.get("metadata") or {}
    return {"metadata": {"name": meta.get("name", ""),
                         "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k in _NODE_KEYS}}}
