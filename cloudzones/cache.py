"""A small thread-safe TTL cache with an injected clock and one fetch at a time per key."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """Entries expire ``ttl`` seconds after they were fetched; concurrent misses on a key share one fetch."""

    def __init__(self, *, ttl: float, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}
        self._guard = threading.Lock()
        self._key_locks: dict[K, threading.Lock] = {}

    def _lock_for(self, key: K) -> threading.Lock:
        with self._guard:
            return self._key_locks.setdefault(key, threading.Lock())

    def peek(self, key: K) -> V | None:
        """The fresh value for ``key``, or None; never fetches."""
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry[0] >= self.ttl:
            return None
        return entry[1]

    def age(self, key: K) -> float | None:
        """Seconds since ``key`` was fetched, or None when absent."""
        entry = self._entries.get(key)
        return None if entry is None else self._clock() - entry[0]

    def get(self, key: K, fetch: Callable[[], V], *, force: bool = False) -> V:
        """The cached value, fetching it when absent, expired, or ``force``; fetch errors are not cached."""
        value = None if force else self.peek(key)
        if value is not None:
            return value
        started = self._clock()
        with self._lock_for(key):
            entry = self._entries.get(key)
            # Another thread fetched while we waited for the lock: use its result.
            if entry is not None and entry[0] >= started and (not force or entry[0] > started):
                return entry[1]
            if not force:
                fresh = self.peek(key)
                if fresh is not None:
                    return fresh
            value = fetch()
            self._entries[key] = (self._clock(), value)
            return value

    def delete(self, key: K) -> None:
        """Forget ``key``."""
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)
