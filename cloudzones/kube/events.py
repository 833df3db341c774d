"""Post core/v1 Events about objects, so ``kubectl describe`` shows why cloudzones could not act.

`emit` posts one at once; `EventRecorder` posts from its own thread so that workers never wait.
"""

from __future__ import annotations

import datetime
import logging
import queue
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from cloudzones import errors, kube

log = logging.getLogger(__name__)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_for(obj: Mapping[str, Any], *, reason: str, message: str, kind: str, component: str,
              event_type: str = "Warning", namespace: str = "default") -> dict[str, Any]:
    """The Event manifest about ``obj`` (a Node or a Pod manifest, or a reference-like mapping)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    ns = str(meta.get("namespace") or namespace)
    stamp = _now()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:12]}", "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": kind, "name": name, "namespace": meta.get("namespace", ""),
                           "uid": meta.get("uid", "")},
        "reason": reason, "message": message[:1024], "type": event_type,
        "source": {"component": component}, "reportingComponent": component,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }


def emit(client: kube.KubeClient, obj: Mapping[str, Any], *, reason: str, message: str, kind: str,
         component: str = "cloudzones", event_type: str = "Warning") -> bool:
    """Create the Event; failures are logged, never raised (an Event is a courtesy, not the job)."""
    return _post(client, event_for(obj, reason=reason, message=message, kind=kind, component=component,
                                   event_type=event_type))


def _post(client: kube.KubeClient, body: dict[str, Any]) -> bool:
    try:
        client.create(kube.EVENTS, body, namespace=body["metadata"]["namespace"])
    except errors.KubeApiError as exc:
        log.warning("cannot post %s event for %s %s: %s", body["reason"], body["involvedObject"]["kind"],
                    body["involvedObject"]["name"], exc)
        return False
    return True


class EventRecorder:
    """Post Events from a thread of their own, as client-go's recorder does: a worker never waits for one.

    Events queue up to ``backlog``; beyond that they are dropped with a log line (an Event is a
    courtesy, the work is the job). `close` posts what is queued, then stops.
    """

    def __init__(self, client: kube.KubeClient, *, component: str, backlog: int = 1000) -> None:
        self.client, self.component = client, component
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(backlog)
        self._thread = threading.Thread(target=self._run, name=f"events-{component}", daemon=True)
        self._thread.start()
        self.dropped = 0

    def record(self, obj: Mapping[str, Any], *, reason: str, message: str, kind: str,
               event_type: str = "Warning") -> None:
        """Queue the Event about ``obj``."""
        body = event_for(obj, reason=reason, message=message, kind=kind, component=self.component,
                         event_type=event_type)
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self.dropped += 1
            log.warning("too many Events waiting; dropped %s about %s %s", reason, kind,
                        body["involvedObject"]["name"])

    def flush(self, timeout: float = 10.0) -> bool:
        """Block until every queued Event is posted (or failed); whether it was within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Post what is queued (up to ``timeout``), then stop the thread."""
        self.flush(timeout)
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            try:
                if body is None:
                    return
                _post(self.client, body)
            finally:
                self._queue.task_done()
