"""The webhook against a silent cloud: every review answered within its budget; the reaper that keeps the deadlines."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from cloudzones import errors
from cloudzones.services.webhook import budget, review
from cloudzones.services.webhook import server as webhook_server
from cloudzones.services.webhook.deadlines import Deadlines
from cloudzones.testing.tls import TlsFiles, make_tls_files
from tests.conftest import FakeClock
from tests.webhook_client import REVIEW, connect, post_review, serving, start, timed_review


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """One certificate pair for the module."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def silent_lookup(release: threading.Event) -> review.LabelsForVolume:
    """A disk lookup that answers nothing until ``release`` is set (then labels nobody waits for any more)."""
    def lookup(pv: Mapping[str, Any]) -> Mapping[str, str]:
        release.wait(60)
        return {"topology.kubernetes.io/zone": "eastus-1", "topology.kubernetes.io/region": "eastus"}
    return lookup


def reviews_counted(server: webhook_server.WebhookServer, result: str) -> float:
    """The server's ``cloudzones_webhook_reviews_total{result=...}``."""
    value = server.metrics.registry.get_sample_value("cloudzones_webhook_reviews_total", {"result": result})
    return value or 0.0


class TestBudget:
    """A silent cloud does not hold a review past its budget."""

    def test_silent_arm_answers_within_budget(self, tls: TlsFiles) -> None:
        """A lookup that never returns: allowed with a warning after the budget, then that connection is closed."""
        release = threading.Event()
        with serving(tls, lambda body: review.review(body, labels_for_volume=silent_lookup(release)),
                     review_budget=budget.for_reviews(0.3)) as srv:
            try:
                with connect(srv, tls.ca_file) as sock:
                    status, answer, elapsed = timed_review(sock)
                    release.set()  # the review ends now: its own answer must not follow the late one
                    sock.settimeout(5)
                    assert sock.recv(1024) == b""
            finally:
                release.set()  # before the server closes: closing waits for the review
        assert status == 200 and 0.3 <= elapsed < 1.0 and answer["response"]["allowed"] is True
        assert answer["response"]["uid"] == json.loads(REVIEW)["request"]["uid"]
        assert "no answer from Azure within the 0.3 s review budget" in answer["response"]["warnings"][0]
        assert reviews_counted(srv, "late") == 1 and reviews_counted(srv, "patched") == 0

    def test_fail_closed_denies(self, tls: TlsFiles) -> None:
        """With --fail-closed an over-budget review is a denial saying why."""
        release = threading.Event()
        with serving(tls, lambda body: review.review(body, labels_for_volume=silent_lookup(release), fail_closed=True),
                     review_budget=budget.for_reviews(0.2, fail_closed=True)) as srv:
            try:
                with connect(srv, tls.ca_file) as sock:
                    status, answer = post_review(sock)
            finally:
                release.set()
        assert status == 200 and answer["response"]["allowed"] is False
        assert "review budget" in answer["response"]["status"]["message"]

    def test_fast_review_keeps_the_connection(self, tls: TlsFiles) -> None:
        """Within the budget the lookup's labels are used, and the connection serves the next review."""
        def labels(pv: Mapping[str, Any]) -> Mapping[str, str]:
            return {"topology.kubernetes.io/zone": "eastus-1", "topology.kubernetes.io/region": "eastus"}

        with serving(tls, lambda body: review.review(body, labels_for_volume=labels),
                     review_budget=budget.for_reviews(2)) as srv, connect(srv, tls.ca_file) as sock:
            answers = [post_review(sock) for _ in range(3)]
        assert all(status == 200 and "patch" in answer["response"] for status, answer in answers)
        assert reviews_counted(srv, "patched") == 3 and reviews_counted(srv, "late") == 0

    def test_review_ending_as_budget_runs_out(self, tls: TlsFiles) -> None:
        """The budget runs out just as the review ends: whichever wins, exactly one whole answer, then the right state.

        The late answer wins: it is the warning, and the connection is closed after it (never before it is
        out). The review wins: its patch, and the connection serves the next review.
        """
        clock = FakeClock()
        deadlines = Deadlines(tick=3600, clock=clock)  # reaped by hand, from inside the lookup
        racing = threading.Event()

        def lookup(pv: Mapping[str, Any]) -> Mapping[str, str]:
            if racing.is_set():
                racing.clear()
                clock.advance(1.0)
                assert deadlines.reap() == 1  # the late answer's thread starts now, and the review returns
            return {"topology.kubernetes.io/zone": "eastus-1", "topology.kubernetes.io/region": "eastus"}

        srv = webhook_server.WebhookServer(
            ("127.0.0.1", 0), certificates=webhook_server.CertificateReloader(str(tls.cert_file), str(tls.key_file)),
            review_fn=lambda body: review.review(body, labels_for_volume=lookup), budget=budget.for_reviews(0.5),
            deadlines=deadlines)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        winners = set()
        try:
            for _ in range(20):
                with connect(srv, tls.ca_file) as sock:
                    racing.set()
                    status, answer = post_review(sock)
                    assert status == 200 and answer["response"]["allowed"] is True
                    if "patch" in answer["response"]:
                        winners.add("review")
                        assert post_review(sock)[0] == 200  # kept open, and no stray late answer queued
                    else:
                        winners.add("late")
                        assert "review budget" in answer["response"]["warnings"][0]
                        sock.settimeout(5)
                        assert sock.recv(1024) == b""
        finally:
            srv.shutdown()
            srv.server_close()
        assert winners  # which one wins each time is the scheduler's choice; both are correct

    @pytest.mark.parametrize("seconds", [0, -1.0, float("nan")])
    def test_budget_above_zero(self, seconds: float) -> None:
        """A budget of 0, below 0 or NaN is a configuration error."""
        with pytest.raises(errors.ConfigError, match="above 0 seconds"):
            budget.for_reviews(seconds)

    def test_budget_below_request_deadline(self, tls: TlsFiles) -> None:
        """A budget the request deadline would cut off first is refused at start-up."""
        with pytest.raises(errors.ConfigError, match="shorter than the request deadline"):
            start(tls, review_budget=budget.for_reviews(2.0), request_seconds=1.0)


class TestDeadlines:
    """The reaper runs what is late, only that, once."""

    def test_late_actions_run_once(self) -> None:
        """Of three deadlines, the late one runs, the removed one never, the future one later."""
        clock = FakeClock()
        deadlines = Deadlines(tick=3600, clock=clock)  # the thread never wakes: reap() by hand
        ran: list[str] = []
        try:
            deadlines.add(1.0, lambda: ran.append("soon"))
            removed = deadlines.add(1.0, lambda: ran.append("removed"))
            deadlines.add(5.0, lambda: ran.append("later"))
            deadlines.remove(removed)
            assert deadlines.reap() == 0
            clock.advance(1.0)
            assert deadlines.reap() == 1 and ran == ["soon"]
            assert deadlines.reap() == 0
            clock.advance(4.0)
            assert deadlines.reap() == 1 and ran == ["soon", "later"]
        finally:
            deadlines.close()

    def test_close_runs_what_is_pending(self) -> None:
        """Closing runs every pending action at once; one added afterwards runs as it is added."""
        deadlines = Deadlines(tick=3600, clock=FakeClock())
        ran: list[str] = []
        deadlines.add(60.0, lambda: ran.append("idle"))
        deadlines.close()
        assert ran == ["idle"]
        deadlines.add(60.0, lambda: ran.append("after"))
        assert ran == ["idle", "after"] and deadlines.reap() == 0

    def test_failing_action_does_not_stop_others(self) -> None:
        """An action that raises is logged; the other late actions still run."""
        clock = FakeClock()
        deadlines = Deadlines(tick=3600, clock=clock)
        ran: list[int] = []

        def boom() -> None:
            raise RuntimeError("boom")

        try:
            deadlines.add(1.0, boom)
            deadlines.add(1.0, lambda: ran.append(1))
            clock.advance(2.0)
            assert deadlines.reap() == 2 and ran == [1]
        finally:
            deadlines.close()


class TestSilentArm:
    """The real provider against an ARM endpoint that accepts connections and never answers."""

    def test_review_answers_within_budget(self, tls: TlsFiles) -> None:
        """labels_for_volume through azure-mgmt-compute hangs on the silent peer; the review still answers in time."""
        from providers.azure import AzureConfig, AzureProvider
        from tests.conftest import FakeCredential

        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(16)  # the kernel completes handshakes; nothing ever reads or answers
            port = silent.getsockname()[1]
            review_body = json.loads(REVIEW)
            subscription = review_body["request"]["object"]["spec"]["azureDisk"]["diskURI"].split("/")[2]
            config = AzureConfig.from_mapping({"subscriptionId": subscription, "resourceGroup": "rg",
                                               "location": "westus"}, environ={})
            provider = AzureProvider(config, credential=FakeCredential(), resource_manager_url=f"https://127.0.0.1:{port}")
            with serving(tls, lambda body: review.review(body, labels_for_volume=provider.labels_for_volume),
                         review_budget=budget.for_reviews(0.5)) as srv, connect(srv, tls.ca_file) as sock:
                _, answer, elapsed = timed_review(sock)
        assert elapsed < 1.5 and answer["response"]["allowed"] is True
        assert "within the 0.5 s review budget" in answer["response"]["warnings"][0]
