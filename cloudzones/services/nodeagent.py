"""The node agent (DaemonSet mode): read this machine's own IMDS and label its own node; no ARM credentials.

It labels once at start, then idles and re-checks every ``interval`` seconds (a VM does not move
between zones, but someone may edit the labels); failures are retried with backoff.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from cloudzones import errors, kube, nodelabels
from cloudzones.kube import events
from cloudzones.retry import RetryPolicy
from cloudzones.topology import Topology

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    """How the node agent behaves."""

    interval: float = 300.0
    """Seconds between re-checks once the node is labelled."""
    retry: RetryPolicy = RetryPolicy(base=2.0, cap=120.0)
    """Waits after failures in a row (a ``Retry-After`` is their floor)."""
    beta_labels: bool = True


class NodeAgent:
    """Label ``node_name`` from ``provider.local_topology()``."""

    def __init__(self, client: kube.KubeClient, provider: Any, node_name: str, *,
                 settings: AgentSettings | None = None, registry: CollectorRegistry | None = None,
                 rand: Callable[[], float] = random.random) -> None:
        if not node_name:
            raise errors.ConfigError("the node agent needs its node's name (set NODE_NAME from spec.nodeName)")
        self.client, self.provider, self.node_name = client, provider, node_name
        self._rand = rand
        self.settings = settings or AgentSettings()
        self.stop_event = threading.Event()
        self.registry = registry or CollectorRegistry()
        self.applied = Counter("cloudzones_node_labels_applied", "Node label patches applied", registry=self.registry)
        self.failures = Counter("cloudzones_resolve_errors", "Failed checks", ["reason"], registry=self.registry)
        self.labelled = threading.Event()
        """Set once the node has been seen correctly labelled."""
        self._topology: Topology | None = None
        self.last_problem = ""
        """Why the last check failed (``""`` after a success)."""

    def check_once(self) -> str:
        """Read IMDS (once per process: a VM does not change zones) and fix the node's labels; says what happened."""
        if self._topology is None:
            self._topology = self.provider.local_topology()
        node = self.client.get(kube.NODES, self.node_name)
        view = nodelabels.project(node)
        patch = nodelabels.label_patch(view.labels, self._topology, beta=self.settings.beta_labels)
        if patch is None:
            self.labelled.set()
            return "unchanged"
        self.client.patch(kube.NODES, self.node_name, patch)
        self.applied.inc()
        self.labelled.set()
        log.info("labelled node %s: %s", self.node_name, patch["metadata"]["labels"])
        return "patched"

    def readiness(self) -> str:
        """``""`` once the node has been seen correctly labelled; else why not (for ``/readyz``).

        A node agent that cannot read its IMDS stays not ready on purpose: a DaemonSet rollout then stops
        at the first node instead of replacing working agents with useless ones.
        """
        if self.labelled.is_set():
            return ""
        return self.last_problem or "the node has not been labelled yet"

    def run(self) -> None:
        """Check now, then every ``interval``; on failure retry with backoff and post an Event on the node."""
        failures = 0
        while not self.stop_event.is_set():
            try:
                self.check_once()
                self.last_problem = ""
                failures = 0
                wait = self.settings.interval
            except errors.CloudZonesError as exc:
                failures += 1
                self.failures.labels(type(exc).__name__).inc()
                self.last_problem = f"cannot label node {self.node_name}: {exc}"
                wait = self.settings.retry.delay(failures, rand=self._rand,
                                                 retry_after=getattr(exc, "retry_after", None))
                log.warning("cannot label node %s: %s; retrying in %.0fs", self.node_name, exc, wait)
                if failures == 1 and not isinstance(exc, errors.KubeApiError):
                    events.emit(self.client, {"metadata": {"name": self.node_name}}, reason="ZoneUnresolved",
                                message=f"node agent cannot resolve its zone: {exc}", kind="Node",
                                component="cloudzones-node-agent")
            self.stop_event.wait(wait)

    def stop(self) -> None:
        """End `run`."""
        self.stop_event.set()
