"""A list+watch informer: a local cache of one resource, kept current, that tells you what changed.

It lists, then watches from the list's resourceVersion with bookmarks; a 410 Gone (at the start
or mid-stream) makes it list again and deliver the difference; other errors back off under
`cloudzones.retry.RetryPolicy` (exponential, full jitter) and resume the watch from the last version seen. Every
``resync_period`` it re-delivers each cached object as an update so that a controller
reconciles again even when nothing changed. Callers pass a projection so that the cache keeps
only what they need (5,000 AKS-sized nodes as name + labels + providerID hold about 8 MB against
nearly 100 MB whole: ``bench/kube_informer.py``); an update whose projection is unchanged (a node
heartbeat, say) is not delivered.

The official client grew a ``SharedInformer`` in v37, but it caches pydantic models, waits a
fixed 5 s after errors, has no jitter and no projection, so we keep this one.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from cloudzones import errors, kube, retry
from cloudzones.kube import workqueue

logger = logging.getLogger(__name__)

T = TypeVar("T")


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's MetaNamespaceKeyFunc)."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name") or "")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else name


@dataclasses.dataclass(frozen=True)
class InformerSettings:
    """Timings of an informer."""

    resync_period: float = 300.0
    """Seconds between re-deliveries of every cached object as an update; 0 turns resync off."""
    watch_timeout: int = 300
    """The ``timeoutSeconds`` of each watch request (shortened to the resync period when that is shorter)."""
    backoff: retry.RetryPolicy = retry.RetryPolicy(base=1.0, cap=60.0)
    """Waits after errors in a row (a ``Retry-After`` from the server is their floor)."""
    page_size: int | None = 500
    """List in pages of this many objects (None: one request)."""


@dataclasses.dataclass
class InformerStats:
    """Counters for tests, logs and metrics."""

    lists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    expired: int = 0
    errors: int = 0
    resyncs: int = 0
    handler_errors: int = 0


class Informer(Generic[T]):
    """Keep a projected cache of ``resource`` current and deliver changes to callbacks and/or a `KeyQueue`.

    Callbacks run on the informer's thread: ``on_add(obj)``, ``on_update(old, new)``,
    ``on_delete(last)``, with projected objects. ``queue`` receives the key of every delivery.
    Run it with `start` (a daemon thread) or `run` (blocking); end it with `stop`.
    ``clock`` (monotonic seconds), ``sleep`` and ``rand`` are injectable for tests.
    """

    def __init__(self, client: kube.KubeClient, resource: kube.Resource | str, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 project: Callable[[dict[str, Any]], T] | None = None,
                 key: Callable[[Mapping[str, Any]], str] = object_key,
                 on_add: Callable[[T], object] | None = None,
                 on_update: Callable[[T, T], object] | None = None,
                 on_delete: Callable[[T], object] | None = None,
                 queue: workqueue.KeyQueue | None = None, settings: InformerSettings | None = None,
                 stop: threading.Event | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] | None = None, rand: Callable[[], float] = random.random) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._project = project or cast(Callable[[dict[str, Any]], T], lambda obj: obj)
        self._key = key
        self._on_add, self._on_update, self._on_delete = on_add, on_update, on_delete
        self.queue = queue
        self.settings = settings or InformerSettings()
        self.stop_event = stop or threading.Event()
        self._clock, self._sleep, self._rand = clock, sleep, rand
        self._lock = threading.Lock()
        self._progress = threading.Condition()
        self._cache: dict[str, T] = {}
        self._stream: kube.WatchStream | None = None
        self._thread: threading.Thread | None = None
        self._next_resync = 0.0
        self._watch_events = 0
        self.resource_version = ""
        """The version the cache reflects (the last list, event or bookmark)."""
        self.synced = threading.Event()
        """Set once the first list is in the cache."""
        self.stats = InformerStats()

    # -- the cache -----------------------------------------------------------------------------
    def get(self, key: str) -> T | None:
        """The cached (projected) object for ``key``, or None."""
        with self._lock:
            return self._cache.get(key)

    def keys(self) -> list[str]:
        """Every cached key, sorted."""
        with self._lock:
            return sorted(self._cache)

    def items(self) -> list[tuple[str, T]]:
        """Every cached (key, object), sorted by key."""
        with self._lock:
            return sorted(self._cache.items(), key=lambda item: item[0])

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    # -- running -------------------------------------------------------------------------------
    def start(self) -> threading.Thread:
        """Run in a daemon thread; returns it."""
        self._thread = threading.Thread(target=self.run, name=f"informer-{self._resource_name}", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float | None = 5.0) -> None:
        """Ask the loop to end, cut the open watch, and wait for the thread started by `start`."""
        self.stop_event.set()
        stream = self._stream
        if stream is not None:
            stream.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Block until the first list is cached; returns whether it was within ``timeout``."""
        return self.synced.wait(timeout)

    def wait_until(self, predicate: Callable[[Informer[T]], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate(self)`` holds, checked after each list, event and bookmark."""
        with self._progress:
            return self._progress.wait_for(lambda: predicate(self), timeout=timeout)

    def _advance(self) -> None:
        with self._progress:
            self._progress.notify_all()

    def run(self) -> None:
        """List and watch until `stop`; errors are retried forever, with backoff."""
        failures = gone = 0
        relist = True
        self._next_resync = self._clock() + self.settings.resync_period
        while not self.stop_event.is_set():
            try:
                if relist:
                    self._list()
                    relist = False
                self._watch()
                failures = gone = 0
            except errors.KubeGone as exc:
                self.stats.expired += 1
                logger.info("%s; listing %s again", exc, self._resource_name)
                relist = True
                gone = gone + 1 if self._watch_events == 0 else 1
                if gone > 1:  # 410 again right after a fresh list: back off rather than spin
                    self._wait(self._backoff(gone - 1, None))
            except errors.KubeApiError as exc:
                self.stats.errors += 1
                failures += 1
                delay = self._backoff(failures, exc.retry_after)
                logger.warning("%s; trying again in %.1f s", exc, delay)
                self._wait(delay)
            except Exception:  # a projection or key function that fails must not end the informer for good
                self.stats.errors += 1
                failures += 1
                delay = self._backoff(failures, None)
                logger.exception("the %s informer failed; trying again in %.1f s", self._resource_name, delay)
                relist = True
                self._wait(delay)

    # -- internals -----------------------------------------------------------------------------
    @property
    def _resource_name(self) -> str:
        return self.resource.plural if isinstance(self.resource, kube.Resource) else self.resource

    def _backoff(self, failures: int, retry_after: float | None) -> float:
        return self.settings.backoff.delay(failures, rand=self._rand, retry_after=retry_after)

    def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        else:
            self.stop_event.wait(seconds)

    def _list(self) -> None:
        fresh: dict[str, T] = {}
        version = ""
        # Project page by page: whole objects are heavy (a 5,000-node list decodes to ~100 MB), and
        # memory they pushed the heap to is seldom handed back to the OS.
        # The very first list delivers each page as it arrives, so that workers start on the first 500
        # objects while the rest are still being listed; later lists deliver the difference at the end.
        first = not self.synced.is_set() and not self._cache
        for page in self.client.list_pages(self.resource, namespace=self.namespace,
                                           label_selector=self.label_selector, field_selector=self.field_selector,
                                           page_size=self.settings.page_size):
            projected = [(self._key(obj), self._project(obj)) for obj in page.get("items") or []]
            fresh.update(projected)
            version = str((page.get("metadata") or {}).get("resourceVersion") or version)
            del page  # not kept alive while the next page is fetched
            if first:
                with self._lock:
                    self._cache.update(projected)
                for key, new in projected:
                    self._deliver("add", key, None, new)
        with self._lock:
            old, self._cache = self._cache, fresh
        self.resource_version = version
        self.stats.lists += 1
        for key in sorted(old.keys() - fresh.keys()):
            self._deliver("delete", key, old[key], None)
        for key, new in sorted(fresh.items(), key=lambda item: item[0]):
            if key not in old:
                self._deliver("add", key, None, new)
            elif old[key] != new:
                self._deliver("update", key, old[key], new)
        self.synced.set()
        self._advance()

    def _watch(self) -> None:
        timeout = self.settings.watch_timeout
        if self.settings.resync_period > 0:
            timeout = min(timeout, max(1, math.ceil(self.settings.resync_period)))
        stream = self.client.watch(self.resource, namespace=self.namespace, resource_version=self.resource_version,
                                   label_selector=self.label_selector, field_selector=self.field_selector,
                                   timeout_seconds=timeout, bookmarks=True)
        self._stream = stream
        self._watch_events = 0
        self.stats.watches += 1
        try:
            if self.stop_event.is_set():
                stream.stop()
            for event in stream:
                self._watch_events += 1
                self._apply(event)
                self._maybe_resync()
                if self.stop_event.is_set():
                    break
        finally:
            self._stream = None
            stream.close()
        self._maybe_resync()

    def _apply(self, event: kube.WatchEvent) -> None:
        if event.type == "BOOKMARK":
            self.stats.bookmarks += 1
        elif event.type in ("ADDED", "MODIFIED", "DELETED"):
            self.stats.events += 1
            key = self._key(event.object)
            if event.type == "DELETED":
                with self._lock:
                    old = self._cache.pop(key, None)
                self._deliver("delete", key, old if old is not None else self._project(event.object), None)
            else:
                new = self._project(event.object)
                with self._lock:
                    old = self._cache.get(key)
                    self._cache[key] = new
                if old is None:
                    self._deliver("add", key, None, new)
                elif old != new:
                    self._deliver("update", key, old, new)
        if event.resource_version:
            self.resource_version = event.resource_version
        self._advance()

    def _maybe_resync(self) -> None:
        if self.settings.resync_period <= 0 or self._clock() < self._next_resync:
            return
        self._next_resync = self._clock() + self.settings.resync_period
        self.stats.resyncs += 1
        for key, obj in self.items():
            self._deliver("update", key, obj, obj)

    def _deliver(self, kind: str, key: str, old: T | None, new: T | None) -> None:
        if self.queue is not None:
            self.queue.add(key)
        try:
            if kind == "add" and self._on_add is not None:
                self._on_add(cast(T, new))
            elif kind == "update" and self._on_update is not None:
                self._on_update(cast(T, old), cast(T, new))
            elif kind == "delete" and self._on_delete is not None:
                self._on_delete(cast(T, old))
        except Exception:
            self.stats.handler_errors += 1
            logger.exception("the %s handler of the %s informer failed for %r", kind, self._resource_name, key)
