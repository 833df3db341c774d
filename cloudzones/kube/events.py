"""Post core/v1 Events about objects, so ``kubectl describe`` shows why cloudzones could not act."""

from __future__ import annotations

import datetime
import logging
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
    body = event_for(obj, reason=reason, message=message, kind=kind, component=component, event_type=event_type)
    try:
        client.create(kube.EVENTS, body, namespace=body["metadata"]["namespace"])
    except errors.KubeApiError as exc:
        log.warning("cannot post %s event for %s %s: %s", reason, kind, body["involvedObject"]["name"], exc)
        return False
    return True
