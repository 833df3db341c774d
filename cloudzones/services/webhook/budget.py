"""A time budget for each review, so that no review outlives the API server's deadline.

The API server gives a mutating webhook ``timeoutSeconds`` (5 s in deploy/) and then applies the
``failurePolicy``; a webhook that answers later has only tied up a connection. A silent ARM held a
review for over 150 s (connect and read timeouts times azure-core's retries). With a `ReviewBudget`
the server answers a review that is not done within ``seconds`` with `ReviewBudget.late_answer`
(``allowed: true`` with a warning, or a denial with ``--fail-closed``) and closes that connection;
the late review's thread finishes in the background and its answer is dropped.

The review runs in its connection's own thread, lookup included: handing the lookup to a pool
thread and waiting for it cost ~100 us of CPU and two GIL hand-offs on every review (bench/webhook.py,
the "service" side), while only a review whose cloud is silent needs the deadline. Late reviews
are bounded by the server's connection cap, as each holds its connection until its lookup returns.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones import errors
from cloudzones.services.webhook import review

ReviewFn = Callable[[bytes], dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class ReviewBudget:
    """How long a review may take, and what a review that takes longer is answered."""

    seconds: float
    """From the whole body read to the answer; keep it below the webhook's ``timeoutSeconds``."""
    late_answer: ReviewFn
    """The answer to a review past ``seconds`` (called with its body, on another thread)."""

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise errors.ConfigError(f"the review budget must be above 0 seconds, got {self.seconds!r}")


def _silent(seconds: float, pv: Mapping[str, Any]) -> Mapping[str, str]:
    # Short: review warnings are cut at 120 characters.
    raise errors.CloudApiError(f"no answer from Azure within the {seconds:g} s review budget")


def for_reviews(seconds: float, *, fail_closed: bool = False) -> ReviewBudget:
    """The budget `cloudzones webhook` gives a review: late, it is answered as if Azure had failed to answer."""
    lookup = functools.partial(_silent, seconds)
    return ReviewBudget(seconds, functools.partial(review.review, labels_for_volume=lookup, fail_closed=fail_closed))
