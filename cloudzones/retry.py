"""The one retry policy every caller uses (pure): exponential backoff, a cap, full jitter, ``Retry-After`` as a floor.

Nothing here sleeps or reads a clock of its own: callers pass the clock and the random source, and
do their own waiting, so tests pin behaviour through injected values and stay instant.

- `RetryPolicy.delay` is the formula: the ``n``-th failure in a row waits a uniformly random time in
  ``[0, min(cap, base * factor**(n-1))]`` ("full jitter": clients that failed together spread out
  instead of marching in step), but never less than the server's ``Retry-After`` (itself cut to
  ``max_retry_after`` so that a hostile or broken header cannot park us for a day).
- `RetryLater` is per-key scheduling on top of it, for controllers that retry objects by key.
- `parse_retry_after` reads the header in both of its forms.

The Kubernetes client, the informer, the node agent, the controller, the annotator and the metadata
clients all use these. ARM calls go through azure-core's own retry policy, which the Azure SDK owns.
"""

from __future__ import annotations

import dataclasses
import email.utils
import heapq
import math
import threading
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How patiently to repeat something that failed in a way worth repeating."""

    base: float = 0.5
    """The ceiling of the first delay, in seconds."""
    cap: float = 30.0
    """No computed delay exceeds this."""
    factor: float = 2.0
    """Each further failure in a row multiplies the ceiling by this."""
    attempts: int = 5
    """Tries in all, the first included, for callers that give up (1 disables retries); loops that retry
    forever (informers, controllers) ignore it."""
    max_retry_after: float = 300.0
    """A ``Retry-After`` longer than this is cut to it."""

    def __post_init__(self) -> None:
        for name in ("base", "cap", "max_retry_after"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"RetryPolicy.{name} must be a finite number >= 0, got {value!r}")
        if not (isinstance(self.factor, (int, float)) and math.isfinite(self.factor) and self.factor >= 1):
            raise ValueError(f"RetryPolicy.factor must be a finite number >= 1, got {self.factor!r}")
        if not (isinstance(self.attempts, int) and self.attempts >= 1):
            raise ValueError(f"RetryPolicy.attempts must be an integer >= 1, got {self.attempts!r}")

    def ceiling(self, failures: int) -> float:
        """The largest delay the ``failures``-th failure in a row can draw (before ``Retry-After``)."""
        exponent = max(0, failures - 1)
        # Past ~1,000 doublings the float overflows; the cap was reached long before.
        if exponent > 1000:
            return self.cap
        return float(min(self.cap, self.base * self.factor**exponent))

    def delay(self, failures: int, *, rand: Callable[[], float], retry_after: float | None = None) -> float:
        """Seconds to wait after the ``failures``-th failure in a row; ``rand()`` draws from ``[0, 1]``."""
        wait = self.ceiling(failures) * min(1.0, max(0.0, rand()))
        if retry_after is not None and math.isfinite(retry_after):
            wait = max(wait, min(max(retry_after, 0.0), self.max_retry_after))
        return wait


class RetryLater:
    """Failing keys with a due time under one `RetryPolicy`; `due` pops those whose time has come."""

    def __init__(self, policy: RetryPolicy, *, clock: Callable[[], float], rand: Callable[[], float]) -> None:
        self.policy = policy
        self._clock, self._rand = clock, rand
        self._lock = threading.Lock()
        self._heap: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}
        self.failures: dict[str, int] = {}
        """Consecutive failures per key."""

    def schedule(self, key: str, *, retry_after: float | None = None) -> float:
        """Record a failure of ``key``; it is due after the policy's delay (never before ``retry_after``)."""
        with self._lock:
            count = self.failures.get(key, 0) + 1
            self.failures[key] = count
            delay = self.policy.delay(count, rand=self._rand, retry_after=retry_after)
            when = self._clock() + delay
            if key not in self._due or when < self._due[key]:
                self._due[key] = when
                heapq.heappush(self._heap, (when, key))
            return delay

    def forget(self, key: str) -> None:
        """``key`` succeeded: reset its backoff and drop any pending retry."""
        with self._lock:
            self.failures.pop(key, None)
            self._due.pop(key, None)

    def due(self) -> list[str]:
        """Keys whose retry time has passed (each returned once per schedule)."""
        now, ready = self._clock(), []
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                when, key = heapq.heappop(self._heap)
                if self._due.get(key) == when:
                    del self._due[key]
                    ready.append(key)
        return ready

    def next_in(self) -> float | None:
        """Seconds until the earliest pending retry, or None."""
        with self._lock:
            while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
                heapq.heappop(self._heap)  # a forgotten or superseded entry
            return None if not self._heap else max(0.0, self._heap[0][0] - self._clock())

    def __len__(self) -> int:
        with self._lock:
            return len(self._due)


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); ``None`` if absent or bad.

    ``now`` is the current wall-clock time (epoch seconds), needed only for the HTTP-date form.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds
