"""Retry arithmetic shared by every adapter: backoff schedules and ``Retry-After`` parsing (pure).

Nothing here sleeps or reads a clock; callers pass ``now`` and do their own waiting, so tests
stay instant.
"""

from __future__ import annotations

import dataclasses
import email.utils
import math
from collections.abc import Iterator


@dataclasses.dataclass(frozen=True)
class Backoff:
    """An exponential backoff schedule."""

    base: float = 0.1
    """The first delay, in seconds."""
    factor: float = 2.0
    """Each delay is the previous one times this."""
    cap: float = 30.0
    """No single delay exceeds this."""

    def delays(self) -> Iterator[float]:
        """An endless sequence of delays."""
        delay = self.base
        while True:
            yield min(delay, self.cap)
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
