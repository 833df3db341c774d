"""The worker loop every reconciling service shares: a key queue, per-key retries, threads that drain it.

A service subclasses `Workers` and defines `Workers.reconcile`; the queue deduplicates keys,
`cloudzones.retry.RetryLater` brings failed keys back when their backoff is over, and workers
act only while `Workers.active` is set (the Lease holder, or always without leader election).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cloudzones.kube import workqueue
from cloudzones.retry import RetryLater, RetryPolicy

log = logging.getLogger(__name__)


class Workers:
    """A deduplicating queue of keys, the retry schedule, and the worker and timer threads."""

    def __init__(self, policy: RetryPolicy, *, name: str, clock: Callable[[], float],
                 rand: Callable[[], float]) -> None:
        self.queue = workqueue.KeyQueue()
        self.retries = RetryLater(policy, clock=clock, rand=rand)
        self.stop_event = threading.Event()
        self.active = threading.Event()
        """Set while this replica may act (always, without leader election)."""
        self._name = name
        self._threads: list[threading.Thread] = []

    def reconcile(self, key: str) -> str:
        """Handle one key and say what happened; raising is a bug (logged, retried)."""
        raise NotImplementedError

    def ready_to_work(self) -> bool:
        """Whether workers may take keys now (e.g. every cache listed); active is checked separately."""
        return True

    def pause(self, timeout: float = 10.0) -> bool:
        """Stop taking keys and wait (bounded) for the reconciles in flight: after this, nothing of ours writes.

        Called when the Lease is lost or about to be released; returns whether they finished in time.
        """
        self.active.clear()
        return self.queue.wait_idle(timeout)

    def observe(self, seconds: float) -> None:
        """Told how long each reconcile took (for a histogram)."""

    def process_one(self, timeout: float | None = 0.5) -> str | None:
        """Take one key from the queue and reconcile it; None when the queue stayed empty."""
        key = self.queue.get(timeout=timeout)
        if key is None:
            return None
        started = time.perf_counter()
        try:
            return self.reconcile(key)
        except Exception:  # a bug must not kill the worker; the key is retried
            log.exception("%s: reconciling %s failed unexpectedly", self._name, key)
            self.retries.schedule(key)
            return "error"
        finally:
            self.observe(time.perf_counter() - started)
            self.queue.done(key)

    def requeue_due(self) -> int:
        """Put keys whose retry time has come back on the queue; returns how many."""
        due = self.retries.due()
        for key in due:
            self.queue.add(key)
        return len(due)

    def start_workers(self, count: int) -> None:
        """Start ``count`` workers and the retry timer."""
        for index in range(count):
            self._spawn(self._work, f"{self._name}-{index}")
        self._spawn(self._retry_timer, f"{self._name}-retries")

    def stop_workers(self) -> None:
        """Stop the loops and wait for their threads."""
        self.stop_event.set()
        self.queue.shutdown()
        for thread in self._threads:
            thread.join(timeout=5)

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _work(self) -> None:
        while not self.stop_event.is_set():
            if not self.active.wait(timeout=0.5):
                continue
            if not self.ready_to_work():
                self.stop_event.wait(0.05)
                continue
            self.process_one(timeout=0.5)

    def _retry_timer(self) -> None:
        while not self.stop_event.is_set():
            self.requeue_due()
            wait = self.retries.next_in()
            self.stop_event.wait(0.5 if wait is None else min(max(wait, 0.01), 0.5))
