"""Tests for the Lease leader elector, against the fake API server with an injected clock."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones import errors, kube
from cloudzones.kube import leader
from cloudzones.retry import RetryPolicy
from cloudzones.testing import FakeKubeApi

START = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)


class Clock:
    """A wall clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)



@pytest.fixture
def client(api: FakeKubeApi) -> Iterator[kube.KubeClient]:
    with kube.KubeClient.for_host(api.url, sleep=lambda _: None, retry=RetryPolicy(attempts=1)) as c:
        yield c


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _elector(client: kube.KubeClient, clock: Clock, identity: str, **options: Any) -> leader.LeaderElector:
    return leader.LeaderElector(client, name="cloudzones", namespace="kube-system", identity=identity,
                                clock=clock, **options)


def _lease(api: FakeKubeApi) -> dict[str, Any]:
    return api.get("leases", "cloudzones", namespace="kube-system")


def _race(electors: list[leader.LeaderElector]) -> list[bool]:
    """Let the electors try at the same moment, each on its own thread; their results."""
    barrier = threading.Barrier(len(electors))
    wins: list[bool] = []
    lock = threading.Lock()

    def attempt(elector: leader.LeaderElector) -> None:
        barrier.wait(5)
        won = elector.try_acquire_or_renew()
        with lock:
            wins.append(won)

    threads = [threading.Thread(target=attempt, args=(e,)) for e in electors]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return wins


class TestAcquire:
    """Acquiring, renewing and respecting another holder."""

    def test_creates_the_lease(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """With no Lease, the first attempt creates it and leads."""
        elector = _elector(client, clock, "a")
        assert elector.try_acquire_or_renew() and elector.is_leader
        spec = _lease(api)["spec"]
        assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        assert leader.parse_time(spec["renewTime"]) == leader.parse_time(spec["acquireTime"]) == START

    def test_renew(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """Renewing moves renewTime only."""
        elector = _elector(client, clock, "a")
        elector.try_acquire_or_renew()
        clock.advance(5)
        assert elector.try_acquire_or_renew()
        spec = _lease(api)["spec"]
        assert leader.parse_time(spec["renewTime"]) == clock.now
        assert leader.parse_time(spec["acquireTime"]) == START and spec["leaseTransitions"] == 0

    def test_respects_a_live_holder(self, client: kube.KubeClient, clock: Clock) -> None:
        """A second candidate does not lead while the holder renews in time."""
        first, second = _elector(client, clock, "a"), _elector(client, clock, "b")
        first.try_acquire_or_renew()
        for _ in range(5):
            clock.advance(9)
            assert not second.try_acquire_or_renew()
            assert first.try_acquire_or_renew()
        assert second.observed_holder == "a" and not second.is_leader

    def test_expiry_uses_the_lease_duration(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """Expiry is judged by the Lease's own leaseDurationSeconds, not the candidate's setting."""
        api.create("leases", {"metadata": {"name": "cloudzones", "namespace": "kube-system"},
                              "spec": {"holderIdentity": "old", "leaseDurationSeconds": 100,
                                       "renewTime": leader.format_micro_time(START), "leaseTransitions": 3}})
        candidate = _elector(client, clock, "new")
        clock.advance(60)  # past our 15 s, within the record's 100 s
        assert not candidate.try_acquire_or_renew()
        clock.advance(41)
        assert candidate.try_acquire_or_renew()
        spec = _lease(api)["spec"]
        assert spec["holderIdentity"] == "new" and spec["leaseTransitions"] == 4
        assert leader.parse_time(spec["acquireTime"]) == clock.now and spec["leaseDurationSeconds"] == 15

    def test_lost_race_on_update(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """A 409 on the write means another candidate won: not leading."""
        api.create("leases", {"metadata": {"name": "cloudzones", "namespace": "kube-system"}, "spec": {}})
        api.fail_next("update", "leases", status=409)
        elector = _elector(client, clock, "a")
        assert not elector.try_acquire_or_renew() and not elector.is_leader
        assert _lease(api)["spec"] == {}

    def test_concurrent_candidates(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """Candidates racing for a free Lease over real HTTP: exactly one wins (create, then takeover races)."""
        for round_ in range(3):
            electors = [_elector(client, clock, f"c{round_}-{i}") for i in range(4)]
            assert sorted(_race(electors)) == [False, False, False, True]
            clock.advance(16)  # let the Lease expire for the next round

    def test_read_errors(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """When the Lease cannot be read the attempt fails without raising."""
        api.fail_next("get", "leases", status=500)
        assert not _elector(client, clock, "a").try_acquire_or_renew()


class TestRelease:
    """Giving the Lease up, and losing it."""

    def test_release_hands_over_at_once(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """After release the holder is empty and another candidate takes over without waiting."""
        first, second = _elector(client, clock, "a"), _elector(client, clock, "b")
        first.try_acquire_or_renew()
        assert first.release() and not first.is_leader
        spec = _lease(api)["spec"]
        assert "holderIdentity" not in spec and spec["leaseDurationSeconds"] == 1
        assert second.try_acquire_or_renew()
        assert _lease(api)["spec"]["leaseTransitions"] == 1

    def test_release_when_not_holder(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """Releasing someone else's Lease does nothing."""
        _elector(client, clock, "a").try_acquire_or_renew()
        before = _lease(api)
        assert not _elector(client, clock, "b").release()
        assert _lease(api) == before

    def test_renew_deadline(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """A leader that cannot renew stops leading after renew_deadline, before the Lease expires."""
        elector = _elector(client, clock, "a")
        elector.try_acquire_or_renew()
        api.fail_next("update", "leases", status=500, count=100)
        clock.advance(9)
        assert not elector.try_acquire_or_renew() and elector.is_leader
        clock.advance(1)
        assert not elector.is_leader
        assert _lease(api)["spec"]["holderIdentity"] == "a"  # others must still wait for the expiry

    def test_settings_checked(self) -> None:
        """renew_deadline must be shorter than lease_duration and longer than retry_period."""
        with pytest.raises(errors.ConfigError, match="renew_deadline"):
            leader.LeaderSettings(lease_duration=10, renew_deadline=10)
        with pytest.raises(errors.ConfigError):
            leader.LeaderSettings(retry_period=0)


class TestRun:
    """The loop: callbacks, the leading event, release on shutdown."""

    def test_run_leads_then_releases(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """run() acquires, renews every retry_period, calls back once each way, and releases on stop."""
        calls: list[str] = []
        elector: leader.LeaderElector

        def sleep(seconds: float) -> None:
            calls.append(f"sleep {seconds}")
            clock.advance(seconds)
            if len(calls) >= 5:
                elector.stop()

        elector = _elector(client, clock, "a", sleep=sleep, on_started_leading=lambda: calls.append("started"),
                           on_stopped_leading=lambda: calls.append("stopped"))
        elector.run()
        assert calls == ["started", "sleep 2.0", "sleep 2.0", "sleep 2.0", "sleep 2.0", "stopped"]
        assert "holderIdentity" not in _lease(api)["spec"] and not elector.leading.is_set()
        assert api.count("update", "leases") == 4  # three renewals and the release

    def test_stops_acting_before_releasing(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """On stop, on_stopped_leading runs while the Lease is still ours: a successor never overlaps our writes."""
        holder_at_stop: list[object] = []
        elector: leader.LeaderElector
        elector = _elector(client, clock, "a", sleep=lambda _: elector.stop(),
                           on_stopped_leading=lambda: holder_at_stop.append(_lease(api)["spec"].get("holderIdentity")))
        elector.run()
        assert holder_at_stop == ["a"]
        assert "holderIdentity" not in _lease(api)["spec"]

    def test_follower_waits(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """A second replica's loop does nothing while the first holds the Lease; it never calls back."""
        _elector(client, clock, "a").try_acquire_or_renew()
        calls: list[str] = []
        follower: leader.LeaderElector

        def sleep(seconds: float) -> None:
            calls.append("sleep")
            if len(calls) >= 3:
                follower.stop()

        follower = _elector(client, clock, "b", sleep=sleep, on_started_leading=lambda: calls.append("started"))
        follower.run()
        assert calls == ["sleep"] * 3 and _lease(api)["spec"]["holderIdentity"] == "a"
        assert api.count("update", "leases") == 0

    def test_callback_errors_are_contained(self, client: kube.KubeClient, clock: Clock) -> None:
        """A failing callback is logged; the elector still tracks leadership."""
        elector: leader.LeaderElector

        def boom() -> None:
            raise RuntimeError("boom")

        elector = _elector(client, clock, "a", on_started_leading=boom, sleep=lambda _: elector.stop())
        elector.run()
        assert not elector.leading.is_set()


# Pauses around the interesting boundaries (retry, renew deadline, lease duration) and anything in between.
_PAUSES = st.one_of(st.sampled_from([0.0, 2.0, 5.0, 7.5, 9.9, 10.0, 15.0, 15.1]), st.floats(0, 16))


class TestNeverTwoLeaders:
    """Whatever the interleaving of steps, pauses and releases, two electors never both lead."""

    @settings(max_examples=60, deadline=None)
    @given(schedule=st.lists(st.tuples(st.sampled_from("ab"), _PAUSES, st.sampled_from(["step"] * 5 + ["release"])),
                             min_size=1, max_size=25))
    def test_interleavings(self, schedule: list[tuple[str, float, str]]) -> None:
        """At every moment at most one elector considers itself leader; after a quiet lease_duration one takes over."""
        clock = Clock()
        with FakeKubeApi() as api, kube.KubeClient.for_host(api.url, retry=RetryPolicy(attempts=1)) as client:
            electors = {name: _elector(client, clock, name) for name in "ab"}
            for who, pause, action in schedule:
                clock.advance(pause)
                assert not (electors["a"].is_leader and electors["b"].is_leader)
                if action == "step":
                    electors[who].try_acquire_or_renew()
                else:
                    electors[who].release()
                assert not (electors["a"].is_leader and electors["b"].is_leader)
            clock.advance(16)
            assert electors["b"].try_acquire_or_renew() and not electors["a"].is_leader


class TestTimes:
    """Kubernetes timestamps."""

    @pytest.mark.parametrize("text", ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.000000Z",
                                      "2024-05-01T12:00:00+00:00", "2024-05-01T14:00:00+02:00"])
    def test_parse(self, text: str) -> None:
        """Z, offsets and fractions all parse to the same aware moment."""
        assert leader.parse_time(text) == START

    def test_format(self) -> None:
        """MicroTime has six fraction digits and Z."""
        assert leader.format_micro_time(START) == "2024-05-01T12:00:00.000000Z"


class TestProblem:
    """The elector says why it cannot take part, for the controller's /readyz."""

    def test_refused_then_allowed(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """A 403 on the Lease sets problem; the next attempt that can read and write clears it."""
        elector = _elector(client, clock, "a")
        api.fail_next("get", "leases", status=403)
        assert not elector.try_acquire_or_renew()
        assert elector.problem.startswith("cannot read the lease")
        assert elector.try_acquire_or_renew() and elector.problem == ""

    def test_create_refused(self, api: FakeKubeApi, client: kube.KubeClient, clock: Clock) -> None:
        """A Lease that cannot be created (403) is a problem until a later attempt creates it."""
        elector = _elector(client, clock, "a")
        api.fail_next("create", "leases", status=403)
        assert not elector.try_acquire_or_renew() and elector.problem.startswith("cannot create the lease")
        assert elector.try_acquire_or_renew() and elector.problem == ""


class TestFollowerWatches:
    """A follower watches the Lease between attempts, so a released Lease is taken within a round trip."""

    def test_release_wakes_the_follower(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """With a 30 s retry period the follower still takes a released Lease at once (it is woken, not polling)."""
        settings = leader.LeaderSettings(lease_duration=60, renew_deadline=45, retry_period=30)
        first = leader.LeaderElector(client, name="cloudzones", namespace="kube-system", identity="a",
                                     settings=settings)
        second = leader.LeaderElector(client, name="cloudzones", namespace="kube-system", identity="b",
                                      settings=settings)
        assert first.try_acquire_or_renew()
        runner = threading.Thread(target=second.run, daemon=True)
        runner.start()
        try:
            assert api.wait_for_watches(1)  # b read the Lease, saw a, and now watches it
            assert not second.leading.is_set()
            assert first.release()
            assert second.leading.wait(5)  # far sooner than the 30 s retry period
            assert _lease(api)["spec"]["holderIdentity"] == "b"
        finally:
            second.stop()
            runner.join(10)
        assert not runner.is_alive()  # stop() also ends a watch in progress
