"""ARM throttling gate and call counter: after a 429, fail fast until ``Retry-After`` has passed.

ARM throttles per subscription and operation class; retrying a 429 only deepens the hole
(cloud-provider-azure #247), so reads and writes each get a gate that a 429 closes.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable

from cloudzones import errors

READ_METHODS = frozenset({"GET", "HEAD"})


@dataclasses.dataclass
class ArmCalls:
    """How many HTTP requests reached ARM, by method (attempts, retries included)."""

    by_method: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    throttled: int = 0
    """Calls refused by the gate without a request."""

    @property
    def total(self) -> int:
        """All requests sent."""
        return sum(self.by_method.values())

    @property
    def reads(self) -> int:
        """GET and HEAD requests sent."""
        return sum(n for method, n in self.by_method.items() if method in READ_METHODS)


class ThrottleGate:
    """Separate read and write deadlines; a call before its deadline raises `CloudApiError` at once."""

    def __init__(self, *, clock: Callable[[], float], default_wait: float = 5.0) -> None:
        self._clock = clock
        self._default_wait = default_wait
        self._lock = threading.Lock()
        self._open_at = {"read": 0.0, "write": 0.0}
        self.calls = ArmCalls()

    @staticmethod
    def kind(method: str) -> str:
        """``read`` for GET/HEAD, ``write`` otherwise."""
        return "read" if method.upper() in READ_METHODS else "write"

    def check(self, method: str) -> None:
        """Raise `CloudApiError` (status 429, ``retry_after`` = seconds left) while ``method``'s gate is closed."""
        kind = self.kind(method)
        with self._lock:
            left = self._open_at[kind] - self._clock()
            if left > 0:
                self.calls.throttled += 1
        if left > 0:
            raise errors.CloudApiError(
                f"ARM {kind}s are throttled for another {left:.1f}s after HTTP 429; not sending",
                status=429, retry_after=left)

    def record(self, method: str) -> None:
        """Count one request about to be sent."""
        with self._lock:
            self.calls.by_method[method.upper()] += 1

    def close(self, method: str, retry_after: float | None) -> float:
        """Close ``method``'s gate for ``retry_after`` seconds (a default when ARM did not say); returns the wait."""
        wait = self._default_wait if retry_after is None else retry_after
        with self._lock:
            kind = self.kind(method)
            self._open_at[kind] = max(self._open_at[kind], self._clock() + wait)
        return wait
