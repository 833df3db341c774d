"""The one retry policy: backoff ceilings, full jitter, Retry-After as a floor, and per-key scheduling."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudzones.retry import RetryLater, RetryPolicy, parse_retry_after
from tests.conftest import FakeClock


class TestRetryPolicy:
    """RetryPolicy.delay: exponential ceiling, capped, full jitter, Retry-After floor."""

    def test_ceilings_double_up_to_the_cap(self) -> None:
        """The top of each range doubles from base and stops at cap."""
        policy = RetryPolicy(base=1, cap=5)
        assert [policy.delay(n, rand=lambda: 1.0) for n in range(1, 6)] == [1, 2, 4, 5, 5]

    def test_full_jitter_scales_the_whole_range(self) -> None:
        """rand() picks anywhere in [0, ceiling]: 0 gives 0, a quarter gives a quarter."""
        policy = RetryPolicy(base=4, cap=100)
        assert policy.delay(3, rand=lambda: 0.0) == 0
        assert policy.delay(3, rand=lambda: 0.25) == 4

    def test_retry_after_is_a_floor_not_a_replacement(self) -> None:
        """A server's Retry-After raises a short draw and leaves a longer one alone."""
        policy = RetryPolicy(base=1, cap=60)
        assert policy.delay(1, rand=lambda: 0.0, retry_after=7) == 7
        assert policy.delay(5, rand=lambda: 1.0, retry_after=7) == 16

    def test_retry_after_is_cut(self) -> None:
        """A Retry-After beyond max_retry_after waits max_retry_after."""
        assert RetryPolicy(max_retry_after=10).delay(1, rand=lambda: 0.0, retry_after=86400) == 10

    def test_huge_failure_counts_do_not_overflow(self) -> None:
        """After thousands of failures the ceiling is the cap, not an OverflowError."""
        assert RetryPolicy(base=1, cap=30).delay(100_000, rand=lambda: 1.0) == 30

    @pytest.mark.parametrize("options", [{"base": -1}, {"cap": float("nan")}, {"factor": 0.5}, {"attempts": 0},
                                         {"max_retry_after": float("inf")}])
    def test_bad_settings_refused(self, options: dict[str, float]) -> None:
        """Negative, NaN, shrinking or zero-attempt policies are refused with the field's name."""
        with pytest.raises(ValueError, match=next(iter(options))):
            RetryPolicy(**options)  # type: ignore[arg-type]

    @given(st.integers(1, 200), st.floats(0, 1), st.one_of(st.none(), st.floats(-10, 1e6)))
    def test_delay_is_bounded(self, failures: int, draw: float, retry_after: float | None) -> None:
        """Every delay lies in [0, max(ceiling, min(Retry-After, max_retry_after))]."""
        policy = RetryPolicy(base=0.5, cap=30, max_retry_after=60)
        delay = policy.delay(failures, rand=lambda: draw, retry_after=retry_after)
        floor = 0.0 if retry_after is None else min(max(retry_after, 0.0), 60)
        assert floor <= delay <= max(policy.ceiling(failures), floor)


class TestRetryLater:
    """Per-key scheduling on the policy, driven by an injected clock and random source."""

    def test_backoff_per_key(self, clock: FakeClock) -> None:
        """Each failure of a key pushes its due time out by the next ceiling; keys are independent."""
        later = RetryLater(RetryPolicy(base=1, cap=3), clock=clock, rand=lambda: 1.0)
        assert [later.schedule("a") for _ in range(4)] == [1, 2, 3, 3]
        assert later.schedule("b") == 1
        assert later.failures == {"a": 4, "b": 1}

    def test_due_and_next_in(self, clock: FakeClock) -> None:
        """A key is due once its time has passed, and only once per schedule."""
        later = RetryLater(RetryPolicy(base=2), clock=clock, rand=lambda: 1.0)
        later.schedule("a")
        assert later.due() == [] and later.next_in() == 2
        clock.advance(2)
        assert later.due() == ["a"] and later.due() == [] and later.next_in() is None

    def test_forget_resets_and_cancels(self, clock: FakeClock) -> None:
        """A success drops the pending retry and starts the backoff over."""
        later = RetryLater(RetryPolicy(base=1), clock=clock, rand=lambda: 1.0)
        later.schedule("a")
        later.schedule("a")
        later.forget("a")
        assert len(later) == 0 and later.next_in() is None
        clock.advance(10)
        assert later.due() == [] and later.schedule("a") == 1

    def test_retry_after_floor(self, clock: FakeClock) -> None:
        """A Retry-After longer than the backoff decides the due time."""
        later = RetryLater(RetryPolicy(base=1), clock=clock, rand=lambda: 1.0)
        assert later.schedule("a", retry_after=30) == 30

    def test_jitter_spreads_keys(self, clock: FakeClock) -> None:
        """Keys that fail together come back at different times (the random source decides)."""
        draws = itertools.cycle([0.1, 0.5, 0.9])
        later = RetryLater(RetryPolicy(base=10), clock=clock, rand=lambda: next(draws))
        assert [later.schedule(k) for k in "abc"] == pytest.approx([1, 5, 9])


class TestParseRetryAfter:
    """Retry-After in both forms; anything else is ignored."""

    @pytest.mark.parametrize(("value", "expected"), [("7", 7.0), (" 1.5 ", 1.5), ("", None), (None, None),
                                                     ("-1", None), ("nan", None), ("soon", None),
                                                     ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0)])
    def test_forms(self, value: str | None, expected: float | None) -> None:
        """Delta-seconds and HTTP dates (relative to now) are read; negatives, NaN and words are not."""
        assert parse_retry_after(value, now=1445412420.0) == expected
