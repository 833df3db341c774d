"""Per-key retry scheduling with exponential backoff: which keys are due again, and when."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable


class RetryLater:
    """Remember failing keys with a due time; `due` pops those whose time has come (injected clock)."""

    def __init__(self, *, clock: Callable[[], float], base: float = 1.0, cap: float = 300.0) -> None:
        self._clock, self._base, self._cap = clock, base, cap
        self._lock = threading.Lock()
        self._heap: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}
        self.failures: dict[str, int] = {}
        """Consecutive failures per key."""

    def schedule(self, key: str, *, at_least: float | None = None) -> float:
        """Record a failure of ``key``; it is due after the backoff (or ``at_least`` seconds if longer)."""
        with self._lock:
            count = self.failures.get(key, 0) + 1
            self.failures[key] = count
            delay = float(min(self._cap, self._base * 2.0 ** (count - 1)))
            if at_least is not None:
                delay = max(delay, at_least)
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
            return None if not self._heap else max(0.0, self._heap[0][0] - self._clock())

    def __len__(self) -> int:
        with self._lock:
            return len(self._due)
