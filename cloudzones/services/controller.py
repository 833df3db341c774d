"""The node labeller controller: watch nodes, resolve each one's zone through the cloud, fix its labels.

One informer keeps a light projection of every node; workers take node names from a
deduplicating queue; a node whose zone cannot be resolved gets a Warning Event and is retried with
backoff (honouring ``Retry-After``). With leader election only the Lease holder acts; the cache
stays warm on the others so a hand-over costs one pass over the queue, not a relist.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cloudzones import errors, kube, nodelabels
from cloudzones.kube import events, informer
from cloudzones.retry import RetryPolicy
from cloudzones.services.workers import Workers
from cloudzones.topology import Topology

log = logging.getLogger(__name__)

#: Errors that mean "this node cannot be resolved right now"; anything else is a bug and is logged loudly.
RESOLVE_ERRORS = (errors.NodeNotFound, errors.ZoneUnavailable, errors.InvalidZone, errors.CloudApiError,
                  errors.MetadataError, errors.ConfigError)


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """How the node labeller behaves."""

    beta_labels: bool = True
    """Also write the deprecated ``failure-domain.beta.kubernetes.io/*`` labels."""
    workers: int = 4
    """Concurrent reconciles (ARM lookups are cached, so most reconciles are cheap)."""
    retry: RetryPolicy = RetryPolicy(base=1.0, cap=300.0)
    """When a node that failed is reconciled again (a ``Retry-After`` from ARM or the API server is the floor)."""
    conflict_retries: int = 3
    """Fresh reads and re-patches after a 409 before giving the node back to the retry queue."""
    informer: informer.InformerSettings = dataclasses.field(default_factory=informer.InformerSettings)


def _is_configuration(exc: Exception) -> bool:
    """Failures no retry can fix: a bad setting, or ARM refusing our credentials (401/403)."""
    return isinstance(exc, errors.ConfigError) or (isinstance(exc, errors.CloudApiError) and exc.status in (401, 403))


class ControllerMetrics:
    """Prometheus metrics of one controller."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.labels_applied = Counter("cloudzones_node_labels_applied", "Node label patches applied", registry=registry)
        self.resolve_errors = Counter("cloudzones_resolve_errors", "Zone resolutions that failed", ["reason"],
                                      registry=registry)
        self.reconcile = Histogram("cloudzones_reconcile_seconds", "Time to reconcile one node", registry=registry)
        self.queue_depth = Gauge("cloudzones_queue_depth", "Nodes waiting to be reconciled", registry=registry)
        self.arm_calls = Gauge("cloudzones_arm_calls", "Requests sent to Azure Resource Manager", registry=registry)


class NodeLabeler(Workers):
    """Label every node with its region and zone (GA and beta keys, plus the fault domain when unzoned)."""

    def __init__(self, client: kube.KubeClient, provider: Any, *, settings: ControllerSettings | None = None,
                 registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.monotonic,
                 rand: Callable[[], float] = random.random,
                 on_node_change: Callable[[str], object] | None = None) -> None:
        self.client, self.provider = client, provider
        self.settings = settings or ControllerSettings()
        super().__init__(self.settings.retry, name="labeller", clock=clock, rand=rand)
        # on_node_change lets the pod annotator wake pods waiting for a node's labels.
        notify = (lambda *views: on_node_change(views[-1].name)) if on_node_change else None
        self.informer: informer.Informer[nodelabels.NodeView] = informer.Informer(
            client, kube.NODES, project=nodelabels.project, queue=self.queue, settings=self.settings.informer,
            stop=self.stop_event, on_add=notify, on_update=notify)
        self.metrics = ControllerMetrics(registry or CollectorRegistry())
        self.config_problem = ""
        """The last failure that no retry can fix (bad credentials, a bad setting), until a lookup succeeds."""
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        calls = getattr(provider, "arm_calls", None)
        if calls is not None:
            self.metrics.arm_calls.set_function(lambda: provider.arm_calls.total)
        self._failing: dict[str, str] = {}

    # -- one node -------------------------------------------------------------------------------

    def reconcile(self, name: str) -> str:
        """Bring node ``name`` up to date; says what happened: patched, unchanged, skipped: <why>, retry."""
        view = self.informer.get(name)
        if view is None:
            self.retries.forget(name)
            return "skipped: deleted"
        if view.unmanaged:
            return "skipped: kubernetes.azure.com/managed=false"
        if not view.provider_id:
            return "skipped: no providerID yet"  # the node's next update will bring it back
        try:
            # Never queue behind another worker's scale-set list: go on with other nodes, and have this
            # one queued again when the list is in (nodes arrive name-sorted, so neighbours share sets).
            topology = self.provider.topology_by_provider_id(view.provider_id, on_busy=lambda: self.queue.add(name))
        except errors.FetchInProgress:
            return "deferred: its scale set is being listed"
        except errors.InvalidResourceId as exc:
            return self._failed(view, "InvalidProviderID", exc)
        except RESOLVE_ERRORS as exc:
            return self._failed(view, type(exc).__name__, exc, retry_after=getattr(exc, "retry_after", None))
        if topology is None:
            return "skipped: not managed by this cloud"
        return self._apply(view, topology)

    def _apply(self, view: nodelabels.NodeView, topology: Topology) -> str:
        current = view
        for _ in range(self.settings.conflict_retries + 1):
            patch = nodelabels.label_patch(current.labels, topology, beta=self.settings.beta_labels)
            if patch is None:
                self._succeeded(view.name)
                return "unchanged"
            if not self.active.is_set():
                return "skipped: not the leader"
            try:
                self.client.patch(kube.NODES, view.name, patch)
            except errors.KubeConflict:
                try:
                    current = nodelabels.project(self.client.get(kube.NODES, view.name))
                except errors.KubeApiError as exc:
                    return self._failed(view, "NodeReadFailed", exc)
                continue
            except errors.KubeNotFound:
                return "skipped: deleted"
            except errors.KubeApiError as exc:
                return self._failed(view, "PatchFailed", exc, retry_after=exc.retry_after, event=False)
            self.metrics.labels_applied.inc()
            log.info("labelled node %s: %s", view.name, patch["metadata"]["labels"])
            self._succeeded(view.name)
            return "patched"
        return self._failed(view, "Conflict", errors.KubeConflict("node kept changing"), event=False)

    def _succeeded(self, name: str) -> None:
        self.retries.forget(name)
        self._failing.pop(name, None)
        self.config_problem = ""

    def readiness(self) -> str:
        """``""`` when this replica can do its work; else why not (for ``/readyz``)."""
        if not self.informer.synced.is_set():
            return "the node informer has not finished its first list"
        if self.config_problem:
            return f"every zone lookup fails for a configuration reason since the last success: {self.config_problem}"
        return ""

    def _failed(self, view: nodelabels.NodeView, reason: str, exc: Exception, *, retry_after: float | None = None,
                event: bool = True) -> str:
        self.metrics.resolve_errors.labels(reason).inc()
        if _is_configuration(exc):
            self.config_problem = str(exc)
        delay = self.retries.schedule(view.name, retry_after=retry_after)
        message = f"cannot resolve the zone of node {view.name}: {exc}"
        log.warning("%s; retrying in %.0fs", message, delay)
        # One Event per distinct failure, not one per retry.
        if event and self.active.is_set() and self._failing.get(view.name) != str(exc):
            events.emit(self.client, {"metadata": {"name": view.name}}, reason="ZoneUnresolved", message=message,
                        kind="Node", component="cloudzones-controller")
        self._failing[view.name] = str(exc)
        return "retry"

    # -- running --------------------------------------------------------------------------------

    def observe(self, seconds: float) -> None:
        """Record one reconcile's duration."""
        self.metrics.reconcile.observe(seconds)

    def enqueue_all(self) -> None:
        """Queue every cached node (after winning the lease)."""
        cached = self.informer.keys()
        for key in cached:
            self.queue.add(key)

    def node_labels(self, name: str) -> dict[str, str] | None:
        """The topology labels of node ``name`` from the cache (for the pod annotator), or None."""
        view = self.informer.get(name)
        return None if view is None else dict(view.labels)

    def start(self, *, leading: bool = True) -> None:
        """Start the informer, the workers and the retry timer; ``leading`` False waits for `set_leading`."""
        self.informer.start()
        if leading:
            self.set_leading(True)
        self.start_workers(self.settings.workers)

    def set_leading(self, leading: bool) -> None:
        """Act (and re-check every node) or pause."""
        if leading and not self.active.is_set():
            self.active.set()
            self.enqueue_all()
        elif not leading:
            self.pause()

    def stop(self) -> None:
        """Stop everything and wait for the threads."""
        self.stop_workers()
        self.informer.stop()
