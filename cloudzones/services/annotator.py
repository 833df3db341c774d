"""The pod zone annotator: copies a bound pod's node topology labels into the pod's annotations.

Pods matching a label selector are watched by an `informer.Informer`; once a pod has a node,
`podzones.decide` says which annotations it lacks and they are merge-patched onto it, so the
pod's containers can read the zone through the downward API. Annotations already present are
never changed. A node lacking a requested label gets a Warning Event on the pod (once per pod,
node and set of missing keys) and the pod is looked at again later, with backoff, or at once
when the caller reports that the node changed (`PodZoneAnnotator.node_changed`).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones import errors, kube, labels, podzones
from cloudzones.kube import informer, workqueue
from cloudzones.retry import RetryLater, RetryPolicy

logger = logging.getLogger(__name__)

NodeLabels = Callable[[str], "Mapping[str, str] | None"]
"""``node_labels(name)``: the node's labels, or None when there is no such node (yet)."""
EventRecorder = Callable[[Mapping[str, Any], str, str], object]
"""``record(pod, reason, message)``: report a Warning about ``pod``."""

REASON_LABEL_MISSING = "TopologyLabelMissing"
"""The reason of the Event created when the pod's node lacks a requested label."""
COMPONENT = "cloudzones-pod-zone-annotator"
"""The Event source component."""


class Outcome(str, enum.Enum):
    """What one reconcile of one pod did."""

    ANNOTATED = "annotated"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    """Not bound yet, terminating or finished."""
    WAITING = "waiting"
    """The node is unknown or lacks a label; retried later."""
    GONE = "gone"
    FAILED = "failed"
    """An API call failed; retried later."""


@dataclasses.dataclass
class AnnotatorStats:
    """Counters for logs and ``/metrics`` (read them with `snapshot`)."""

    reconciles: int = 0
    annotated: int = 0
    """Pods patched with at least one new annotation."""
    events: int = 0
    """Events created because a node lacked a label."""
    conflicts: int = 0
    """Annotations left alone because the pod already had a different value."""
    waiting: int = 0
    """Reconciles that had to wait for a node or its labels."""
    errors: int = 0
    """Failed API calls (node read, pod read or patch, Event create) and unexpected failures."""
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, count: int = 1) -> None:
        """Add ``count`` to the counter ``name``."""
        with self._lock:
            setattr(self, name, getattr(self, name) + count)

    def snapshot(self) -> dict[str, int]:
        """Every counter, by name."""
        with self._lock:
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("_")}


@dataclasses.dataclass(frozen=True)
class AnnotatorSettings:
    """What the annotator copies and how it retries."""

    keys: tuple[str, ...] = podzones.DEFAULT_KEYS
    """Node label keys to copy, in the order of the combined value; each becomes an annotation of that name."""
    combined_annotation: str = labels.POD_ZONES
    """The annotation holding every value joined with ``_``."""
    namespace: str | None = None
    """Watch pods of this namespace only (None: every namespace)."""
    workers: int = 2
    """Worker threads."""
    retry: RetryPolicy = RetryPolicy(base=5.0, cap=300.0)
    """When a pod that waits for its node, or failed, is looked at again."""


def node_labels_from_api(client: kube.KubeClient) -> NodeLabels:
    """A ``node_labels`` that GETs the node each time (the controller passes its node cache instead)."""
    def lookup(name: str) -> Mapping[str, str] | None:
        try:
            node = client.get(kube.NODES, name)
        except errors.KubeNotFound:
            return None
        return dict((node.get("metadata") or {}).get("labels") or {})
    return lookup


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def event_recorder(client: kube.KubeClient, *, component: str = COMPONENT, instance: str | None = None,
                   now: Callable[[], datetime.datetime] = _utc_now) -> EventRecorder:
    """A recorder creating a core/v1 Warning Event on the pod, in the pod's namespace."""
    host = instance or socket.gethostname()

    def record(pod: Mapping[str, Any], reason: str, message: str) -> None:
        metadata = pod.get("metadata") or {}
        namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
        stamp = now().astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved = {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace}
        if metadata.get("uid"):
            involved["uid"] = str(metadata["uid"])
        client.create(kube.EVENTS, {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": involved, "type": "Warning", "reason": reason, "message": message,
            "source": {"component": component, "host": host},
            "reportingComponent": component, "reportingInstance": host,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }, namespace=namespace)
    return record


class PodZoneAnnotator:
    """Annotate the pods matching ``label_selector`` with their node's topology labels.

    ``node_labels`` reads a node's labels (default: `node_labels_from_api`); ``record_event``
    reports a missing label (default: `event_recorder`). `start` runs the pod informer, the
    workers and the retry timer in daemon threads; `stop` ends them (`start` may be called
    again afterwards, with a fresh informer and queue). `run_once` and `reconcile` do one pod
    on the caller's thread. ``clock`` (monotonic seconds) times the retries.
    """

    def __init__(self, client: kube.KubeClient, *, label_selector: str, node_labels: NodeLabels | None = None,
                 settings: AnnotatorSettings | None = None, record_event: EventRecorder | None = None,
                 informer_settings: informer.InformerSettings | None = None,
                 clock: Callable[[], float] = time.monotonic, rand: Callable[[], float] = random.random) -> None:
        if not label_selector.strip():
            raise errors.ConfigError("the pod zone annotator needs a non-empty label selector (an empty one "
                                     "would annotate every pod), e.g. 'cloudzones.io/zone-injection=enabled'")
        self.client = client
        self.label_selector = label_selector
        self.settings = settings or AnnotatorSettings()
        self.keys = podzones.validate_keys(self.settings.keys, self.settings.combined_annotation)
        if self.settings.workers < 1:
            raise errors.ConfigError(f"the pod zone annotator needs at least one worker, got {self.settings.workers}")
        self._node_labels = node_labels or node_labels_from_api(client)
        self._record_event = record_event or event_recorder(client)
        self._informer_settings = informer_settings
        self._clock = clock
        self.stats = AnnotatorStats()
        self._lock = threading.Lock()
        self._retries = RetryLater(self.settings.retry, clock=clock, rand=rand)
        self._waiting: dict[str, str] = {}  # key -> node it waits for
        self._reported: dict[str, tuple[Any, ...]] = {}  # key -> what was last reported (Event or log)
        self._wake = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.queue = workqueue.KeyQueue()
        self.informer = self._new_informer()

    @property
    def annotation_keys(self) -> tuple[str, ...]:
        """Every annotation the annotator writes: one per key, then the combined one."""
        return (*self.keys, self.settings.combined_annotation)

    def _new_informer(self) -> informer.Informer[dict[str, Any]]:
        keys = self.annotation_keys
        return informer.Informer(self.client, kube.PODS, namespace=self.settings.namespace,
                                 label_selector=self.label_selector,
                                 project=lambda pod: podzones.project_pod(pod, keys),
                                 queue=self.queue, settings=self._informer_settings)

    # -- one pod ----------------------------------------------------------------------------------
    def reconcile(self, pod: Mapping[str, Any]) -> Outcome:
        """Bring one pod's annotations up to date; never raises for API failures (see `Outcome`)."""
        self.stats.add("reconciles")
        key = informer.object_key(pod)
        node = podzones.bound_node(pod)
        if not node or podzones.is_finished(pod):
            return Outcome.SKIPPED
        try:
            node_labels = self._node_labels(node)
        except errors.KubeApiError as exc:
            self.stats.add("errors")
            logger.warning("cannot read the labels of node %r for pod %s: %s", node, key, exc)
            return Outcome.FAILED
        decision = podzones.decide(pod, node_labels, keys=self.keys, combined=self.settings.combined_annotation)
        if decision.action in (podzones.Action.WAIT_NODE, podzones.Action.WAIT_LABELS):
            return self._wait(pod, key, decision)
        with self._lock:
            self._waiting.pop(key, None)
        if decision.conflicts:
            self._report_conflicts(pod, key, decision)
        if decision.action is not podzones.Action.PATCH:
            return Outcome.UNCHANGED
        metadata = pod.get("metadata") or {}
        try:
            self.client.patch(kube.PODS, str(metadata.get("name") or ""), podzones.annotation_patch(decision.patch),
                              namespace=str(metadata.get("namespace") or ""))
        except errors.KubeNotFound:
            return Outcome.GONE
        except errors.KubeApiError as exc:
            self.stats.add("errors")
            logger.warning("cannot annotate pod %s with its zone: %s", key, exc)
            return Outcome.FAILED
        self.stats.add("annotated")
        logger.info("annotated pod %s on node %r with %s", key, node, dict(decision.patch))
        return Outcome.ANNOTATED

    def run_once(self, key: str) -> Outcome:
        """Reconcile the pod ``namespace/name`` (from the informer cache once synced, else a GET); schedule retries."""
        try:
            pod = self._lookup(key)
        except errors.KubeApiError as exc:
            self.stats.add("errors")
            logger.warning("cannot read pod %s: %s", key, exc)
            pod, outcome = None, Outcome.FAILED
        else:
            outcome = Outcome.GONE if pod is None else self.reconcile(pod)
        if outcome in (Outcome.WAITING, Outcome.FAILED):
            self._schedule_retry(key)
        elif outcome is Outcome.GONE:
            self._forget(key)
        else:
            self._retries.forget(key)
            with self._lock:
                if outcome is not Outcome.SKIPPED and self._reported.get(key, ("",))[0] == "missing":
                    del self._reported[key]  # the labels came: a later lack is news again
        return outcome

    def node_changed(self, node: str) -> int:
        """Queue again every pod waiting for ``node`` (call it when the node appears or its labels change)."""
        with self._lock:
            keys = sorted(key for key, waited in self._waiting.items() if waited == node)
        for key in keys:
            self.queue.add(key)
        return len(keys)

    def waiting(self) -> dict[str, str]:
        """Pods waiting for their node or its labels: key → node."""
        with self._lock:
            return dict(self._waiting)

    # -- running ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Run the pod informer, ``settings.workers`` workers and the retry timer in daemon threads."""
        if self._threads:
            return
        if self._stop.is_set():  # a previous run shut its queue down: start afresh
            self._stop.clear()
            self.queue = workqueue.KeyQueue()
            self.informer = self._new_informer()
        self._threads = [threading.Thread(target=self._work, name=f"pod-zone-annotator-{n}", daemon=True)
                         for n in range(self.settings.workers)]
        self._threads.append(threading.Thread(target=self._retry_loop, name="pod-zone-retries", daemon=True))
        for thread in self._threads:
            thread.start()
        self.informer.start()

    def stop(self, timeout: float | None = 5.0) -> None:
        """End the informer, workers and timer; a pod being handled is finished first, queued ones are dropped."""
        self._stop.set()
        self.informer.stop(timeout)
        self.queue.shutdown()
        with self._wake:
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until the pod informer has listed once."""
        return self.informer.wait_for_sync(timeout)

    def requeue_due(self) -> float | None:
        """Queue the pods whose retry is due; returns seconds until the next one (None: none pending)."""
        for key in self._retries.due():
            self.queue.add(key)
        return self._retries.next_in()

    # -- internals ------------------------------------------------------------------------------------
    def _lookup(self, key: str) -> Mapping[str, Any] | None:
        if self.informer.synced.is_set():
            return self.informer.get(key)
        namespace, _, name = key.rpartition("/")
        try:
            return self.client.get(kube.PODS, name, namespace=namespace)
        except errors.KubeNotFound:
            return None

    def _wait(self, pod: Mapping[str, Any], key: str, decision: podzones.Decision) -> Outcome:
        self.stats.add("waiting")
        with self._lock:
            self._waiting[key] = decision.node
        if decision.action is podzones.Action.WAIT_NODE:
            logger.info("pod %s is bound to node %r, which is not known yet; trying again later", key, decision.node)
            return Outcome.WAITING
        uid = (pod.get("metadata") or {}).get("uid")
        signature = ("missing", uid, decision.node, decision.missing)
        with self._lock:
            if self._reported.get(key) == signature:
                return Outcome.WAITING
        message = podzones.missing_labels_message(decision.node, decision.missing)
        logger.warning("pod %s: %s", key, message)
        try:
            self._record_event(pod, REASON_LABEL_MISSING, message)
        except errors.KubeApiError as exc:
            self.stats.add("errors")
            logger.warning("cannot create an Event on pod %s: %s", key, exc)
            return Outcome.WAITING
        self.stats.add("events")
        with self._lock:
            self._reported[key] = signature
        return Outcome.WAITING

    def _report_conflicts(self, pod: Mapping[str, Any], key: str, decision: podzones.Decision) -> None:
        uid = (pod.get("metadata") or {}).get("uid")
        signature = ("conflict", uid, tuple(sorted(decision.conflicts.items())))
        with self._lock:
            if self._reported.get(key) == signature:
                return
            self._reported[key] = signature
        self.stats.add("conflicts", len(decision.conflicts))
        for annotation, (present, wanted) in sorted(decision.conflicts.items()):
            logger.warning("pod %s already has the annotation %s=%r; leaving it (node %r says %r)",
                           key, annotation, present, decision.node, wanted)

    def _schedule_retry(self, key: str) -> None:
        self._retries.schedule(key)
        with self._wake:
            self._wake.notify_all()

    def _forget(self, key: str) -> None:
        self._retries.forget(key)
        with self._lock:
            self._waiting.pop(key, None)
            self._reported.pop(key, None)

    def _work(self) -> None:
        queue = self.queue
        while True:
            key = queue.get()
            if key is None:
                return
            if self._stop.is_set():  # leadership lost or shutting down: leave the rest to the next run
                queue.done(key)
                return
            try:
                self.run_once(key)
            except Exception:  # a bug must not kill the worker: count it, retry the pod later
                self.stats.add("errors")
                logger.exception("the pod zone annotator failed on %s", key)
                self._schedule_retry(key)
            finally:
                queue.done(key)

    def _retry_loop(self) -> None:
        while not self._stop.is_set():
            following = self.requeue_due()
            with self._wake:
                if self._stop.is_set():
                    return
                # the clock is injectable, so never trust it for a long sleep: re-check at least every second
                self._wake.wait(1.0 if following is None else min(max(following, 0.01), 1.0))

