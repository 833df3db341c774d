"""The webhook against hostile clients and a silent cloud: answers within its budget, JSON errors, bounded costs."""

from __future__ import annotations

import json
import pathlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from cloudzones import errors
from cloudzones.services.webhook import budget, review
from cloudzones.services.webhook import server as webhook_server
from cloudzones.services.webhook.deadlines import Deadlines
from cloudzones.testing.tls import TlsFiles, make_tls_files
from tests.conftest import FakeClock, fixture_text


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """One certificate pair for the module."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def start(tls: TlsFiles, review_fn: Any = None, *, review_budget: budget.ReviewBudget | None = None,
          **limits: Any) -> webhook_server.WebhookServer:
    """A webhook server on a free loopback port with the given limits (and review budget)."""
    def allow(body: bytes) -> dict[str, Any]:
        return review.review(body, labels_for_volume=lambda pv: {})

    return webhook_server.serve(host="127.0.0.1", port=0, cert_file=str(tls.cert_file), key_file=str(tls.key_file),
                                review_fn=review_fn or allow, limits=webhook_server.ServerLimits(**limits),
                                budget=review_budget)


@pytest.fixture
def running(tls: TlsFiles) -> Iterator[webhook_server.WebhookServer]:
    """A server with short limits so the tests stay fast."""
    server = start(tls, request_seconds=1.0, idle_seconds=5.0, connections=4)
    yield server
    server.shutdown()
    server.server_close()


def connect(server: webhook_server.WebhookServer, ca: pathlib.Path) -> ssl.SSLSocket:
    """A TLS connection to the server."""
    host, port = server.server_address[:2]
    context = ssl.create_default_context(cafile=str(ca))
    raw = socket.create_connection((str(host), port), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def exchange(sock: ssl.SSLSocket, data: bytes) -> tuple[int, dict[str, Any]]:
    """Send raw bytes, read one response (Content-Length framed); status and JSON body."""
    sock.sendall(data)
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {buffer!r}"
        buffer += chunk
    head, _, body = buffer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = int(next(v for k, _, v in (line.partition(": ") for line in lines[1:]) if k.lower() == "content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    assert "application/json" in head.decode().lower()
    return int(lines[0].split()[1]), json.loads(body[:length])


REVIEW = fixture_text("admission/pv-create-azuredisk.json").encode()


def post_review(sock: ssl.SSLSocket) -> tuple[int, dict[str, Any]]:
    """POST the fixture review on ``sock``; status and JSON answer."""
    return exchange(sock, b"POST /mutate-pv HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(REVIEW) + REVIEW)


def silent_lookup(release: threading.Event) -> review.LabelsForVolume:
    """A disk lookup that answers nothing until ``release`` is set (then nothing useful)."""
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
        srv = start(tls, lambda body: review.review(body, labels_for_volume=silent_lookup(release)),
                    review_budget=budget.for_reviews(0.3))
        try:
            with connect(srv, tls.ca_file) as sock:
                started = time.monotonic()
                status, answer = post_review(sock)
                elapsed = time.monotonic() - started
                release.set()  # the review ends now: its own answer must not follow the late one
                sock.settimeout(5)
                assert sock.recv(1024) == b""
        finally:
            release.set()
            srv.shutdown()
            srv.server_close()
        assert status == 200 and 0.3 <= elapsed < 1.0 and answer["response"]["allowed"] is True
        assert answer["response"]["uid"] == json.loads(REVIEW)["request"]["uid"]
        assert "no answer from Azure within the 0.3 s review budget" in answer["response"]["warnings"][0]
        assert reviews_counted(srv, "late") == 1 and reviews_counted(srv, "patched") == 0

    def test_fail_closed_denies(self, tls: TlsFiles) -> None:
        """With --fail-closed an over-budget review is a denial saying why."""
        release = threading.Event()
        srv = start(tls, lambda body: review.review(body, labels_for_volume=silent_lookup(release), fail_closed=True),
                    review_budget=budget.for_reviews(0.2, fail_closed=True))
        try:
            with connect(srv, tls.ca_file) as sock:
                status, answer = post_review(sock)
        finally:
            release.set()
            srv.shutdown()
            srv.server_close()
        assert status == 200 and answer["response"]["allowed"] is False
        assert "review budget" in answer["response"]["status"]["message"]

    def test_fast_review_keeps_the_connection(self, tls: TlsFiles) -> None:
        """Within the budget the lookup's labels are used, and the connection serves the next review."""
        def labels(pv: Mapping[str, Any]) -> Mapping[str, str]:
            return {"topology.kubernetes.io/zone": "eastus-1", "topology.kubernetes.io/region": "eastus"}

        srv = start(tls, lambda body: review.review(body, labels_for_volume=labels), review_budget=budget.for_reviews(2))
        try:
            with connect(srv, tls.ca_file) as sock:
                answers = [post_review(sock) for _ in range(3)]
        finally:
            srv.shutdown()
            srv.server_close()
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


class TestHostileRequests:
    """Malformed framing and bodies get JSON errors; the connection is never confused."""

    def test_deeply_nested_json_is_400(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """100,000 nested arrays: 400 saying so, not a 500."""
        body = b"[" * 100_000 + b"]" * 100_000
        with connect(running, tls.ca_file) as sock:
            status, answer = exchange(sock, b"POST /mutate-pv HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert status == 400 and "nested too deeply" in answer["error"]

    def test_chunked_is_411_and_not_a_second_request(self, running: webhook_server.WebhookServer,
                                                     tls: TlsFiles) -> None:
        """A chunked body is refused with 411 and the connection closed (its bytes are never parsed as a request)."""
        chunk = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        body = b"%x\r\n" % len(chunk) + chunk + b"\r\n0\r\n\r\n"
        with connect(running, tls.ca_file) as sock:
            status, answer = exchange(sock, b"POST /mutate-pv HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      + body)
            assert status == 411 and "Content-Length" in answer["error"]
            sock.settimeout(5)
            assert sock.recv(1024) == b""  # closed: no second answer

    @pytest.mark.parametrize(("request_head", "status", "says"), [
        (b"POST /mutate-pv HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "conflicting"),
        (b"POST /mutate-pv HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400, "bad header line"),
        (b"POST /mutate-pv HTTP/1.1\r\nno colon here\r\n\r\n", 400, "bad header line"),
        (b"POST /mutate-pv HTTP/1.1\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n", 431, "more than 100 header lines"),
        (b"POST /mutate-pv HTTP/1.1\r\nX-A: " + b"a" * 70_000 + b"\r\n\r\n", 431, "header line too long"),
        (b"POST /mutate-pv HTTP/2.0\r\n\r\n", 400, "bad request line"),
        (b"POST  /mutate-pv HTTP/1.1\r\n\r\n", 400, "bad request line"),
        (b"post /mutate-pv HTTP/1.1\r\n\r\n", 501, "unsupported method"),
    ])
    def test_bad_framing_closes(self, running: webhook_server.WebhookServer, tls: TlsFiles, request_head: bytes,
                                status: int, says: str) -> None:
        """Framing the server does not accept is one JSON error, then the connection is closed."""
        with connect(running, tls.ca_file) as sock:
            answered, answer = exchange(sock, request_head)
            assert answered == status and says in answer["error"], answer
            sock.settimeout(5)
            assert sock.recv(1024) == b""

    def test_http_1_0_closes_after_answer(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """An HTTP/1.0 request without keep-alive is answered, then the connection closed."""
        with connect(running, tls.ca_file) as sock:
            status, answer = exchange(sock, b"GET /healthz HTTP/1.0\r\n\r\n")
            assert (status, answer) == (200, {"status": "ok"})
            sock.settimeout(5)
            assert sock.recv(1024) == b""

    def test_keep_alive_serves_many(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """Three reviews on one HTTP/1.1 connection, each answered whole."""
        with connect(running, tls.ca_file) as sock:
            for _ in range(3):
                status, answer = exchange(sock, b"POST /mutate-pv HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
                                          % len(REVIEW) + REVIEW)
                assert status == 200 and answer["response"]["allowed"] is True

    @pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "FROB"])
    def test_other_methods_get_json(self, running: webhook_server.WebhookServer, tls: TlsFiles, method: str) -> None:
        """Unknown methods answer 501 with a JSON body, not an HTML page."""
        with connect(running, tls.ca_file) as sock:
            status, answer = exchange(sock, f"{method} /mutate-pv HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert status == 501 and answer["code"] == 501


class TestConnectionLimits:
    """Slow and numerous clients cost a bounded amount."""

    def test_slowloris_is_cut_off(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """Headers trickled slower than the request deadline: the connection is closed near the deadline."""
        with connect(running, tls.ca_file) as sock:
            sock.sendall(b"POST /mutate-pv HTTP/1.1\r\n")
            started = time.monotonic()
            closed = False
            for _ in range(20):  # a header byte every 0.2 s, each within the per-read timeout
                try:
                    sock.sendall(b"X")
                except OSError:
                    closed = True
                    break
                sock.settimeout(0.2)
                try:
                    if sock.recv(1) == b"":
                        closed = True
                        break
                except (TimeoutError, ssl.SSLError, OSError):
                    pass
        assert closed and time.monotonic() - started < 2.5

    @pytest.mark.parametrize("handshake", [True, False], ids=["after-a-review", "never-said-hello"])
    def test_idle_connection_closed(self, tls: TlsFiles, handshake: bool) -> None:
        """An idle keep-alive connection, or one that never starts TLS, is closed after idle_seconds."""
        srv = start(tls, request_seconds=1.0, idle_seconds=0.5)
        try:
            host, port = srv.server_address[:2]
            sock = socket.create_connection((str(host), port), timeout=10)
            if handshake:
                sock = ssl.create_default_context(cafile=str(tls.ca_file)).wrap_socket(sock, server_hostname=str(host))
                assert post_review(sock)[0] == 200
            with sock:
                started = time.monotonic()
                sock.settimeout(5)
                try:
                    closed = sock.recv(1024) == b""
                except (ConnectionResetError, ssl.SSLError):
                    closed = True
                elapsed = time.monotonic() - started
        finally:
            srv.shutdown()
            srv.server_close()
        assert closed and 0.4 <= elapsed < 2.0

    def test_server_close_closes_idle_connections(self, tls: TlsFiles) -> None:
        """server_close() ends a keep-alive connection waiting for its next request at once, not after idle_seconds."""
        srv = start(tls, request_seconds=1.0, idle_seconds=30.0)
        with connect(srv, tls.ca_file) as sock:
            assert post_review(sock)[0] == 200
            srv.shutdown()
            started = time.monotonic()
            srv.server_close()
            sock.settimeout(5)
            try:
                closed = sock.recv(1024) == b""
            except (ConnectionResetError, ssl.SSLError):
                closed = True
        assert closed and time.monotonic() - started < 2.0

    def test_connection_cap(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """Over the cap, a new connection is closed at once; the ones within it still work."""
        held = [connect(running, tls.ca_file) for _ in range(4)]
        try:
            for sock in held:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert sock.recv(1024).startswith(b"HTTP/1.1 200")
            extra_refused = False
            try:
                with connect(running, tls.ca_file) as extra:
                    extra.settimeout(5)
                    extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    extra_refused = extra.recv(1024) == b""
            except (ssl.SSLError, OSError):
                extra_refused = True
            assert extra_refused and running.refused_connections >= 1
        finally:
            for sock in held:
                sock.close()


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
            srv = start(tls, lambda body: review.review(body, labels_for_volume=provider.labels_for_volume),
                        review_budget=budget.for_reviews(0.5))
            try:
                with connect(srv, tls.ca_file) as sock:
                    started = time.monotonic()
                    _, answer = post_review(sock)
                    elapsed = time.monotonic() - started
            finally:
                srv.shutdown()
                srv.server_close()
        assert elapsed < 1.5 and answer["response"]["allowed"] is True
        assert "within the 0.5 s review budget" in answer["response"]["warnings"][0]
