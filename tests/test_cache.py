"""TtlCache: expiry on an injected clock, one fetch per key, and callers that will not wait behind a fetch."""

from __future__ import annotations

import contextlib
import threading

import pytest

from cloudzones import errors
from cloudzones.cache import TtlCache
from tests.conftest import FakeClock


class TestTtlCache:
    """One fetch at a time per key; fresh values are served without fetching."""

    def test_expiry(self, clock: FakeClock) -> None:
        """A value is served until ttl has passed, then fetched again."""
        cache: TtlCache[str, int] = TtlCache(ttl=10, clock=clock)
        fetched = iter(range(10))
        assert cache.get("k", lambda: next(fetched)) == 0
        clock.advance(9.9)
        assert cache.get("k", lambda: next(fetched)) == 0
        clock.advance(0.1)
        assert cache.get("k", lambda: next(fetched)) == 1


class TestOnBusy:
    """A caller with on_busy is told at once that another thread is fetching, and called back when it is done."""

    def fetch_in_background(self, cache: TtlCache[str, str], *, fail: bool = False) -> tuple[threading.Thread,
                                                                                           threading.Event]:
        started, release = threading.Event(), threading.Event()

        def fetch() -> str:
            started.set()
            assert release.wait(10)
            if fail:
                raise errors.CloudApiError("ARM said no")
            return "listed"

        def run() -> None:
            with contextlib.suppress(errors.CloudApiError):
                cache.get("set", fetch)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert started.wait(10)
        return thread, release

    @pytest.mark.parametrize("fail", [False, True])
    def test_busy_then_called_back(self, clock: FakeClock, fail: bool) -> None:
        """FetchInProgress at once, no second fetch; the callback runs once the fetch ends, failed or not."""
        cache: TtlCache[str, str] = TtlCache(ttl=60, clock=clock)
        thread, release = self.fetch_in_background(cache, fail=fail)
        woken: list[str] = []
        with pytest.raises(errors.FetchInProgress):
            cache.get("set", lambda: pytest.fail("a second fetch"), on_busy=lambda: woken.append("a"))
        assert woken == []
        release.set()
        thread.join(10)
        assert woken == ["a"]
        if not fail:
            assert cache.get("set", lambda: "again", on_busy=lambda: woken.append("b")) == "listed"
            assert woken == ["a"]

    def test_free_key_is_fetched(self, clock: FakeClock) -> None:
        """Nobody fetching: on_busy changes nothing, the caller fetches itself."""
        cache: TtlCache[str, str] = TtlCache(ttl=60, clock=clock)
        assert cache.get("set", lambda: "mine", on_busy=lambda: pytest.fail("not busy")) == "mine"
