"""The webhook against hostile clients: JSON errors, closed connections, bounded costs."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator

import pytest

from cloudzones.services.webhook import server as webhook_server
from cloudzones.testing.tls import TlsFiles, make_tls_files
from tests.webhook_client import REVIEW, connect, exchange, post_review, serving, start


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """One certificate pair for the module."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def running(tls: TlsFiles) -> Iterator[webhook_server.WebhookServer]:
    """A server with short limits so the tests stay fast."""
    with serving(tls, request_seconds=1.0, idle_seconds=5.0, connections=4) as server:
        yield server


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
        with serving(tls, request_seconds=1.0, idle_seconds=0.5) as srv:
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
