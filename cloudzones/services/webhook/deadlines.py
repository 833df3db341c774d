"""One reaper thread for every deadline of the webhook server: idle connections, slow requests, late reviews.

The server's sockets block without a timeout. A socket with a timeout makes every read and write a
``poll()`` plus the call, each releasing and re-taking the GIL: at 16 busy connections those
hand-offs were a fifth of the server's CPU and most of its latency tail (bench/webhook.py). Instead,
what must happen by a time is registered here, and the one reaper thread acts on what is late —
shuts a connection down, or sends a review's late answer — a tick at most after its time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Deadlines:
    """Actions to run when their time passes, unless removed first; one daemon thread runs them."""

    def __init__(self, *, tick: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[float, Callable[[], None]]] = {}
        self._next = 0
        self._tick, self._clock = tick, clock
        self._stop = threading.Event()
        threading.Thread(target=self._reap, daemon=True, name="webhook-deadlines").start()

    def add(self, seconds: float, on_late: Callable[[], None]) -> int:
        """Run ``on_late`` in ``seconds`` unless `remove` is called with the returned token first.

        After `close` every deadline is already past: ``on_late`` runs at once.
        """
        due = self._clock() + seconds
        with self._lock:
            if not self._stop.is_set():
                self._next += 1
                self._pending[self._next] = (due, on_late)
                return self._next
        self._run([on_late])
        return 0

    def remove(self, token: int) -> None:
        """Forget a deadline (met, or already acted on)."""
        with self._lock:
            self._pending.pop(token, None)

    def close(self) -> None:
        """End the reaper and run every pending action now: the server is closing, so every connection goes."""
        with self._lock:
            self._stop.set()
            pending = [action for _, action in self._pending.values()]
            self._pending.clear()
        self._run(pending)

    def reap(self) -> int:
        """Run every action that is late now; how many ran (the reaper thread calls this each tick)."""
        now = self._clock()
        with self._lock:
            late = [(token, action) for token, (due, action) in self._pending.items() if due <= now]
            for token, _ in late:
                del self._pending[token]
        self._run([action for _, action in late])
        return len(late)

    @staticmethod
    def _run(actions: list[Callable[[], None]]) -> None:
        for action in actions:
            try:
                action()
            except Exception:  # one failing action must not stop the reaper for every other connection
                log.exception("a webhook deadline action failed")

    def _reap(self) -> None:
        while not self._stop.wait(self._tick):
            self.reap()
