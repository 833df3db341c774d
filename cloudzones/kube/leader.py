"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that two replicas never both act.

One step (`LeaderElector.try_acquire_or_renew`) reads the Lease and writes it back under its
``resourceVersion``: a 409 means another candidate wrote first and we lost the race. A Lease is
free when its ``holderIdentity`` is empty or its ``renewTime`` is older than its *own*
``leaseDurationSeconds`` (not our setting: a holder may use a different duration). Taking a
Lease over bumps ``leaseTransitions`` and sets ``acquireTime``. A leader that cannot renew for
``renew_deadline`` (shorter than ``lease_duration``) stops leading before anyone else may start;
on shutdown it releases the Lease (empty holder, 1 s duration) so a successor need not wait.

The official client's elector (``kubernetes.leaderelection``) judges expiry by its local setting,
never releases and does not maintain ``leaseTransitions``, hence this one. Expiry compares the
Lease's ``renewTime`` with our clock: replicas whose clocks disagree by more than
``lease_duration - renew_deadline`` could overlap.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones import errors, kube

logger = logging.getLogger(__name__)


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def format_micro_time(moment: datetime.datetime) -> str:
    """A Kubernetes MicroTime: ``2024-05-01T12:00:00.123456Z``."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime.datetime:
    """A Kubernetes Time or MicroTime (``Z`` or ``+00:00``, with or without fractions), timezone-aware."""
    moment = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class LeaderSettings:
    """Timings of an elector, in seconds (client-go's defaults)."""

    lease_duration: float = 15.0
    """How long a Lease stays ours after a renewal; written as ``leaseDurationSeconds``."""
    renew_deadline: float = 10.0
    """A leader that has not renewed for this long stops leading; must be shorter than ``lease_duration``."""
    retry_period: float = 2.0
    """Seconds between attempts to acquire or renew."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise errors.ConfigError(
                "leader election needs 0 < retry_period < renew_deadline < lease_duration, got "
                f"retry_period={self.retry_period!r}, renew_deadline={self.renew_deadline!r}, "
                f"lease_duration={self.lease_duration!r}")


class LeaderElector:
    """Compete for the Lease ``namespace/name`` as ``identity``; `is_leader` says whether we may act now.

    `run` loops until `stop`, calling ``on_started_leading`` / ``on_stopped_leading`` on its own
    thread (keep them short: set an event, start a thread); `leading` mirrors the state as an Event.
    ``clock`` (aware UTC datetimes) and ``sleep`` are injectable for tests.
    """

    def __init__(self, client: kube.KubeClient, *, name: str, namespace: str, identity: str | None = None,
                 settings: LeaderSettings | None = None,
                 on_started_leading: Callable[[], object] | None = None,
                 on_stopped_leading: Callable[[], object] | None = None,
                 stop: threading.Event | None = None,
                 clock: Callable[[], datetime.datetime] = _utc_now,
                 sleep: Callable[[float], object] | None = None) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.settings = settings or LeaderSettings()
        self._on_started, self._on_stopped = on_started_leading, on_stopped_leading
        self.stop_event = stop or threading.Event()
        self._clock, self._sleep = clock, sleep
        self._last_renew: datetime.datetime | None = None
        self.leading = threading.Event()
        """Set while `run` considers us the leader."""
        self.observed_holder = ""
        """The holder seen in the Lease at the last attempt."""
        self.problem = ""
        """Why the last attempt could not read or write the Lease (403, 404 namespace...), ``""`` when it could."""
        self._lease_version = ""
        self._stream: kube.WatchStream | None = None

    # -- one step ------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        """Whether we renewed the Lease less than ``renew_deadline`` ago."""
        last = self._last_renew
        return last is not None and (self._clock() - last).total_seconds() < self.settings.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        """Take the Lease if it is free, renew it if it is ours; True when we hold it now."""
        now = self._clock()
        self.problem = ""
        try:
            lease = self.client.get(kube.LEASES, self.name, namespace=self.namespace)
        except errors.KubeNotFound:
            return self._create(now)
        except errors.KubeApiError as exc:
            logger.warning("cannot read the lease %s/%s: %s", self.namespace, self.name, exc)
            self.problem = f"cannot read the lease {self.namespace}/{self.name}: {exc}"
            return False
        spec = dict(lease.get("spec") or {})
        holder = str(spec.get("holderIdentity") or "")
        self.observed_holder = holder
        self._lease_version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        if holder and holder != self.identity and not self._expired(spec, now):
            self._last_renew = None  # someone else holds it: whatever we believed, we do not lead
            return False
        if holder != self.identity:
            spec["acquireTime"] = format_micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=self._duration,
                    renewTime=format_micro_time(now))
        try:
            self.client.update(kube.LEASES, {**lease, "spec": spec}, namespace=self.namespace)
        except errors.KubeConflict:
            logger.info("lost the race for the lease %s/%s", self.namespace, self.name)
            return False
        except errors.KubeApiError as exc:
            logger.warning("cannot write the lease %s/%s: %s", self.namespace, self.name, exc)
            self.problem = f"cannot write the lease {self.namespace}/{self.name}: {exc}"
            return False
        if holder != self.identity:
            logger.info("%s acquired the lease %s/%s (was %r)", self.identity, self.namespace, self.name, holder)
        self._last_renew = now
        self.observed_holder = self.identity
        return True

    def release(self) -> bool:
        """Give the Lease up if we hold it (empty holder, 1 s duration); True when released."""
        self._last_renew = None
        try:
            lease = self.client.get(kube.LEASES, self.name, namespace=self.namespace)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return False
            spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=format_micro_time(self._clock()))
            self.client.update(kube.LEASES, {**lease, "spec": spec}, namespace=self.namespace)
        except errors.KubeApiError as exc:
            logger.warning("cannot release the lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        logger.info("%s released the lease %s/%s", self.identity, self.namespace, self.name)
        return True

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Acquire and renew every ``retry_period`` until `stop`; then release if we led."""
        try:
            while not self.stop_event.is_set():
                self.try_acquire_or_renew()
                self._sync_state()
                if self._sleep is not None:
                    self._sleep(self.settings.retry_period)
                elif self.is_leader:
                    self.stop_event.wait(self.settings.retry_period)
                else:
                    self._wait_for_release(self.settings.retry_period)
        finally:
            held = self.leading.is_set() or self.is_leader
            if self.leading.is_set():
                # Stop acting before letting go: the successor takes a released Lease within a round trip,
                # and must not find us still writing (found on the real API server: a node created in
                # that window was labelled by the old leader after its release).
                self.leading.clear()
                self._notify(self._on_stopped, "stopped")
            if held:
                self.release()
            self._sync_state()

    def stop(self) -> None:
        """Ask `run` to end (it releases the Lease on the way out)."""
        self.stop_event.set()
        stream = self._stream
        if stream is not None:
            stream.stop()

    def _wait_for_release(self, seconds: float) -> None:
        """A follower waits ``seconds``, but watches the Lease meanwhile and tries again as soon as it is released.

        Polling alone would leave a released Lease free for up to a whole retry period after the leader's
        SIGTERM; with the watch the successor takes over within a round trip.
        """
        if not self._lease_version:
            self.stop_event.wait(seconds)
            return
        deadline = time.monotonic() + seconds
        try:
            self._stream = self.client.watch(kube.LEASES, namespace=self.namespace,
                                             field_selector=f"metadata.name={self.name}",
                                             resource_version=self._lease_version,
                                             timeout_seconds=max(1, math.ceil(seconds)), bookmarks=False)
            for event in self._stream:
                spec = event.object.get("spec") or {}
                if event.type == "DELETED" or not spec.get("holderIdentity") or self.stop_event.is_set():
                    return
        except errors.KubeApiError as exc:
            logger.debug("cannot watch the lease %s/%s: %s", self.namespace, self.name, exc)
        finally:
            stream, self._stream = self._stream, None
            if stream is not None:
                stream.stop()
        # The watch ended early (an error, the server's timeout): wait out the rest of the period.
        self.stop_event.wait(max(0.0, deadline - time.monotonic()))

    def _sync_state(self) -> None:
        leader = self.is_leader
        if leader and not self.leading.is_set():
            self.leading.set()
            self._notify(self._on_started, "started")
        elif not leader and self.leading.is_set():
            self.leading.clear()
            self._notify(self._on_stopped, "stopped")

    def _notify(self, callback: Callable[[], object] | None, what: str) -> None:
        logger.info("%s %s leading %s/%s", self.identity, what, self.namespace, self.name)
        if callback is not None:
            try:
                callback()
            except Exception:
                logger.exception("the on_%s_leading callback failed", what)

    # -- internals -----------------------------------------------------------------------------
    @property
    def _duration(self) -> int:
        return math.ceil(self.settings.lease_duration)

    def _create(self, now: datetime.datetime) -> bool:
        stamp = format_micro_time(now)
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self._duration,
                     "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0},
        }
        try:
            self.client.create(kube.LEASES, body, namespace=self.namespace)
        except errors.KubeAlreadyExists:
            logger.info("another candidate created the lease %s/%s first", self.namespace, self.name)
            return False
        except errors.KubeApiError as exc:
            logger.warning("cannot create the lease %s/%s: %s", self.namespace, self.name, exc)
            self.problem = f"cannot create the lease {self.namespace}/{self.name}: {exc}"
            return False
        logger.info("%s created and holds the lease %s/%s", self.identity, self.namespace, self.name)
        self._last_renew = now
        self.observed_holder = self.identity
        return True

    @staticmethod
    def _expired(spec: Mapping[str, Any], now: datetime.datetime) -> bool:
        renew, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
        if not renew or not duration:
            return True
        try:
            renewed = parse_time(str(renew))
        except ValueError:
            return True
        return (now - renewed).total_seconds() > float(duration)
