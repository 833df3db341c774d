"""A deduplicating queue of object keys, in the manner of client-go's workqueue.

A key waits in the queue at most once however often it is added; a key added while a worker is
processing it is queued again when the worker calls `KeyQueue.done`, so two workers never
handle the same key at once and no change is lost.
"""

from __future__ import annotations

import collections
import threading


class KeyQueue:
    """FIFO of distinct keys with processing semantics: ``get`` a key, handle it, then ``done`` it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: collections.deque[str] = collections.deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._again: set[str] = set()
        self._shut = False

    def add(self, key: str) -> None:
        """Queue ``key`` unless it is already waiting (or mark it for another round if being processed)."""
        with self._cond:
            if self._shut or key in self._queued:
                return
            if key in self._processing:
                self._again.add(key)
                return
            self._queued.add(key)
            self._queue.append(key)
            self._cond.notify()

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, now being processed; None when ``timeout`` passes or the queue is shut down."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._queue or self._shut, timeout=timeout) or not self._queue:
                return None
            key = self._queue.popleft()
            self._queued.discard(key)
            self._processing.add(key)
            return key

    def done(self, key: str) -> None:
        """Finish processing ``key``; it is queued again if it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if not self._processing:
                self._cond.notify_all()  # for wait_idle
            if key in self._again:
                self._again.discard(key)
                if not self._shut:
                    self._queued.add(key)
                    self._queue.append(key)
                    self._cond.notify()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no key is being processed; whether that happened within ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._processing, timeout=timeout)

    def shutdown(self) -> None:
        """Refuse new keys and wake every waiting ``get`` (which then returns None once the queue is empty)."""
        with self._cond:
            self._shut = True
            self._cond.notify_all()

    def __len__(self) -> int:
        """Keys waiting (not counting those being processed)."""
        with self._cond:
            return len(self._queue)

    def __contains__(self, key: object) -> bool:
        with self._cond:
            return key in self._queued
