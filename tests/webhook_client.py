"""A raw TLS client for the webhook server's tests: start a server, connect, send bytes, read one answer."""

from __future__ import annotations

import contextlib
import json
import pathlib
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

from cloudzones.services.webhook import budget, review
from cloudzones.services.webhook import server as webhook_server
from cloudzones.testing.tls import TlsFiles
from tests.conftest import fixture_text


def start(tls: TlsFiles, review_fn: Any = None, *, review_budget: budget.ReviewBudget | None = None,
          **limits: Any) -> webhook_server.WebhookServer:
    """A webhook server on a free loopback port with the given limits (and review budget)."""
    def allow(body: bytes) -> dict[str, Any]:
        return review.review(body, labels_for_volume=lambda pv: {})

    return webhook_server.serve(host="127.0.0.1", port=0, cert_file=str(tls.cert_file), key_file=str(tls.key_file),
                                review_fn=review_fn or allow, limits=webhook_server.ServerLimits(**limits),
                                budget=review_budget)


@contextlib.contextmanager
def serving(tls: TlsFiles, review_fn: Any = None, *, review_budget: budget.ReviewBudget | None = None,
            **limits: Any) -> Iterator[webhook_server.WebhookServer]:
    """`start`'s server, shut down and closed when the block ends (closing waits for its reviews)."""
    server = start(tls, review_fn, review_budget=review_budget, **limits)
    try:
        yield server
    finally:
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


def timed_review(sock: ssl.SSLSocket) -> tuple[int, dict[str, Any], float]:
    """`post_review`, and the seconds its answer took."""
    started = time.monotonic()
    status, answer = post_review(sock)
    return status, answer, time.monotonic() - started
