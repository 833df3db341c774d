"""The metrics/health port: readiness with its reason, a scrape burst within the kubelet's 1 s, quiet on resets."""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from cloudzones.services import health


def get(url: str, timeout: float = 5) -> tuple[int, str]:
    """Status and body of a GET (error statuses included)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


@pytest.fixture
def state() -> dict[str, str]:
    """What ready() returns: "" (ready) or a reason."""
    return {"reason": "the node informer has not finished its first list"}


@pytest.fixture
def server(state: dict[str, str]) -> Iterator[health.HealthServer]:
    """A health server on a free loopback port."""
    registry = CollectorRegistry()
    Counter("cloudzones_test_things", "things", registry=registry).inc(3)
    srv = health.HealthServer(("127.0.0.1", 0), registry=registry, ready=lambda: state["reason"], timeout=0.5).start()
    yield srv
    srv.shutdown()
    srv.server_close()


class TestEndpoints:
    """/metrics, /healthz, /readyz (with why), 404 elsewhere."""

    def test_paths(self, server: health.HealthServer, state: dict[str, str]) -> None:
        """/readyz is 503 with the reason until ready() returns "", then 200."""
        status, body = get(f"{server.url}/metrics")
        assert status == 200 and "cloudzones_test_things_total 3.0" in body
        assert get(f"{server.url}/readyz") == (503, "not ready: the node informer has not finished its first list\n")
        state["reason"] = ""
        assert get(f"{server.url}/readyz") == (200, "ok\n")
        assert get(f"{server.url}/healthz")[0] == 200 and get(f"{server.url}/nope")[0] == 404


class TestUnderLoad:
    """What the kubelet and Prometheus need from the port."""

    def test_200_concurrent_scrapes_within_a_second(self, server: health.HealthServer, state: dict[str, str]) -> None:
        """200 simultaneous /readyz all answer, each within the kubelet's 1 s probe timeout."""
        state["reason"] = ""

        def timed() -> tuple[int, float]:
            started = time.perf_counter()
            status = get(f"{server.url}/readyz", timeout=1)[0]
            return status, time.perf_counter() - started

        with concurrent.futures.ThreadPoolExecutor(200) as pool:
            results = list(pool.map(lambda _: timed(), range(200)))
        assert [s for s, _ in results] == [200] * 200
        assert max(t for _, t in results) < 1.0

    def test_silent_client_is_dropped(self, server: health.HealthServer) -> None:
        """A client that connects and sends nothing is closed after the timeout; others are served meanwhile."""
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), port)) as silent:
            assert get(f"{server.url}/healthz")[0] == 200
            silent.settimeout(5)
            assert silent.recv(1) == b""  # closed by the server, not left open forever

    def test_reset_is_not_a_traceback(self, server: health.HealthServer, caplog: pytest.LogCaptureFixture,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A client that resets mid-request leaves no traceback on stderr, one debug line at most."""
        host, port = server.server_address[:2]
        for _ in range(5):
            sock = socket.create_connection((str(host), port))
            sock.sendall(b"GET /metrics HTTP/1.0\r\n")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
            sock.close()
        with caplog.at_level(logging.DEBUG):
            assert get(f"{server.url}/healthz")[0] == 200
        assert "Traceback" not in capsys.readouterr().err

    def test_one_request_per_connection(self, server: health.HealthServer) -> None:
        """HTTP/1.0 answers close the connection: no idle keep-alive connection holds a thread."""
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), port)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
            sock.settimeout(5)
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
        assert data.startswith(b"HTTP/1.0 200")
