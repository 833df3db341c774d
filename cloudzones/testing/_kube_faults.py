"""Fault injection and the request log of the fake API server.

A rule matches requests by verb (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
``delete``) and resource (plural, ``nodes/status`` for a subresource); ``"*"`` matches anything.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """One request the fake answered (watches are logged when they start)."""

    method: str
    path: str
    verb: str
    resource: str
    namespace: str
    name: str
    query: dict[str, str]
    content_type: str
    status: int
    headers: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)
    """The request headers, names lower-cased (``authorization`` included: this is a test double)."""


@dataclasses.dataclass
class Fault:
    """Fail the next ``remaining`` matching requests with ``status`` (or by dropping the connection)."""

    verb: str
    resource: str
    status: int
    remaining: int
    retry_after: float | None = None
    message: str | None = None
    disconnect: bool = False

    def matches(self, verb: str, resource: str) -> bool:
        """Whether this rule applies to a request."""
        return self.verb in ("*", verb) and self.resource in ("*", resource)


@dataclasses.dataclass(frozen=True)
class _Latency:
    verb: str
    resource: str
    seconds: float


class FaultBook:
    """Faults to inject, latencies to add, and the log of requests, shared by the handler threads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._faults: list[Fault] = []
        self._latencies: list[_Latency] = []
        self._log: list[RequestRecord] = []

    def add_fault(self, fault: Fault) -> None:
        """Queue a fault; older rules are consumed first."""
        with self._cond:
            self._faults.append(fault)

    def take_fault(self, verb: str, resource: str) -> Fault | None:
        """The first rule matching this request, consumed once; None when no rule matches."""
        with self._cond:
            for fault in self._faults:
                if fault.matches(verb, resource):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def set_latency(self, seconds: float, verb: str, resource: str) -> None:
        """Delay matching requests by ``seconds`` (0 removes the rule)."""
        with self._cond:
            self._latencies = [lat for lat in self._latencies if (lat.verb, lat.resource) != (verb, resource)]
            if seconds > 0:
                self._latencies.append(_Latency(verb, resource, seconds))

    def latency(self, verb: str, resource: str) -> float:
        """The total added delay for a request."""
        with self._cond:
            return sum(lat.seconds for lat in self._latencies
                       if lat.verb in ("*", verb) and lat.resource in ("*", resource))

    def clear(self) -> None:
        """Forget every pending fault and latency."""
        with self._cond:
            self._faults.clear()
            self._latencies.clear()

    def pending(self) -> list[Fault]:
        """Copies of the faults still to fire."""
        with self._cond:
            return [dataclasses.replace(fault) for fault in self._faults]

    def record(self, entry: RequestRecord) -> None:
        """Append to the request log and wake anyone waiting on it."""
        with self._cond:
            self._log.append(entry)
            self._cond.notify_all()

    def requests(self) -> list[RequestRecord]:
        """A copy of the request log, oldest first."""
        with self._cond:
            return list(self._log)

    def reset(self) -> None:
        """Empty the request log."""
        with self._cond:
            self._log.clear()

    def wait(self, predicate: Callable[[list[RequestRecord]], bool], timeout: float) -> bool:
        """Block until ``predicate(log)`` holds or ``timeout`` seconds pass; returns whether it held."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self._log), timeout=timeout)
