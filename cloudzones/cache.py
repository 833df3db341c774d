"""A small thread-safe TTL cache with an injected clock and one fetch at a time per key.

A caller that must not wait behind another thread's fetch passes ``on_busy``: instead of blocking it
gets `cloudzones.errors.FetchInProgress`, and ``on_busy`` is called once that fetch is over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cloudzones import errors

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
        self._waiters: dict[K, list[Callable[[], object]]] = {}

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

    def get(self, key: K, fetch: Callable[[], V], *, force: bool = False,
            on_busy: Callable[[], object] | None = None) -> V:
        """The cached value, fetching it when absent, expired, or ``force``; fetch errors are not cached.

        With ``on_busy``, a miss while another thread is fetching ``key`` raises `FetchInProgress`
        at once, and ``on_busy()`` is called (on the fetching thread) when that fetch ends.
        """
        value = None if force else self.peek(key)
        if value is not None:
            return value
        lock = self._lock_for(key)
        if on_busy is not None:
            with self._guard:
                # The fetcher releases the key lock before it wakes waiters under the guard, so a
                # waiter registered here is always woken, and one that finds the lock free just reads.
                if lock.locked():
                    self._waiters.setdefault(key, []).append(on_busy)
                    raise errors.FetchInProgress(f"{key!r} is being fetched by another thread")
        started = self._clock()
        try:
            with lock:
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
        finally:
            with self._guard:
                waiters = self._waiters.pop(key, [])
            for wake in waiters:
                wake()

    def delete(self, key: K) -> None:
        """Forget ``key``."""
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)
