"""A time budget for the cloud lookups a review makes, so that no review outlives the API server's deadline.

The API server gives a mutating webhook ``timeoutSeconds`` (5 s in deploy/) and then applies the
``failurePolicy``; a webhook that answers later has only tied up a connection and a thread. A silent ARM
held a review for over 150 s (connect and read timeouts times azure-core's retries). `Budgeted` runs
each lookup on a small pool of worker threads and waits at most ``seconds`` for it: past that the
review gets `errors.CloudApiError` ("over budget"), which `review.review` turns into ``allowed: true``
with a warning (or a denial with ``--fail-closed``). The late lookup finishes in the background and
its result is dropped; the pool bounds how many can pile up.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones import errors

LabelsForVolume = Callable[[Mapping[str, Any]], Mapping[str, str]]


class Budgeted:
    """``labels_for_volume`` with a deadline; callable like the function it wraps."""

    def __init__(self, lookup: LabelsForVolume, *, seconds: float, workers: int = 8) -> None:
        if not seconds > 0:
            raise errors.ConfigError(f"the review budget must be above 0 seconds, got {seconds!r}")
        self.lookup, self.seconds = lookup, seconds
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="disk-lookup")
        self._lock = threading.Lock()
        self.overruns = 0
        """Lookups that ran out of budget (for tests and logs)."""

    def __call__(self, pv: Mapping[str, Any]) -> Mapping[str, str]:
        # Time spent queued for a worker counts too: the budget is the review's, not the lookup's.
        future = self._pool.submit(self.lookup, pv)
        try:
            return future.result(timeout=self.seconds)
        except concurrent.futures.TimeoutError:
            future.cancel()  # still queued: never runs; already running: its result is dropped
            with self._lock:
                self.overruns += 1
            # Short: review warnings are cut at 120 characters.
            raise errors.CloudApiError(f"no answer from Azure within the {self.seconds:g} s review budget") from None

    def close(self) -> None:
        """Stop accepting lookups; running ones are not waited for."""
        self._pool.shutdown(wait=False, cancel_futures=True)
