"""Retry arithmetic shared by every adapter: backoff schedules and ``Retry-After`` parsing (pure).

Nothing here sleeps or reads a clock; callers pass ``now`` and do their own waiting, so tests
stay instant.
"""

from __future__ import annotations

import dataclasses
import email.utils
import math
import random
from collections.abc import Iterator


@dataclasses.dataclass(frozen=True)
class Backoff:
    """An exponential backoff schedule with optional full jitter."""

    base: float = 0.1
    """The first delay, in seconds."""
    factor: float = 2.0
    """Each delay is the previous one times this."""
    cap: float = 30.0
    """No single delay exceeds this."""
    jitter: float = 0.0
    """Fraction of each delay that is randomised (0: none, 1: anywhere in [0, delay])."""

    def delays(self, *, rng: random.Random | None = None) -> Iterator[float]:
        """An endless sequence of delays; ``rng`` makes the jitter reproducible."""
        delay = self.base
        while True:
            value = min(delay, self.cap)
            if self.jitter and rng is not None:
                value -= value * self.jitter * rng.random()
            yield value
            delay *= self.factor


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
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds
