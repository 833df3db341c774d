"""The webhook's HTTPS server: ``POST /mutate-pv`` (AdmissionReview), ``GET /healthz``; TLS 1.2+ only.

Certificates are read from files and reloaded when they change (cert-manager rotates them in
place), checked at most once a second and applied to new connections. The handler never lets an
exception escape: a malformed body gets 400 with the reason, anything else a valid review.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from cloudzones.services.webhook import review as reviews

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
"""The API server sends at most a few hundred KiB; refuse more rather than buffer it."""
ReviewFn = Callable[[bytes], dict[str, Any]]


class CertificateReloader:
    """An SSLContext that is rebuilt when the certificate or key file changes."""

    def __init__(self, cert_file: str, key_file: str, *, clock: Callable[[], float] = time.monotonic,
                 check_every: float = 1.0) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._clock, self._check_every = clock, check_every
        self._lock = threading.Lock()
        self._stamp = self._mtimes()
        self._checked = clock()
        self.context = self._build()
        self.reloads = 0

    def _mtimes(self) -> tuple[float, float]:
        return os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def current(self) -> ssl.SSLContext:
        """The context to use for a new connection, reloaded if the files changed (a broken pair keeps the old)."""
        with self._lock:
            if self._clock() - self._checked >= self._check_every:
                self._checked = self._clock()
                try:
                    stamp = self._mtimes()
                    if stamp != self._stamp:
                        self.context = self._build()
                        self._stamp = stamp
                        self.reloads += 1
                        log.info("reloaded TLS certificate from %s", self.cert_file)
                except (OSError, ssl.SSLError) as exc:
                    log.warning("keeping the old TLS certificate: cannot load %s: %s", self.cert_file, exc)
            return self.context


class WebhookMetrics:
    """Prometheus metrics of one webhook server."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.reviews = Counter("cloudzones_webhook_reviews", "Admission reviews answered", ["result"],
                               registry=self.registry)
        self.latency = Histogram("cloudzones_webhook_review_seconds", "Time to answer a review",
                                 registry=self.registry, buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5))


class WebhookServer(http.server.ThreadingHTTPServer):
    """HTTPS only: every accepted connection is wrapped with the current certificate before any byte is read."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], *, certificates: CertificateReloader, review_fn: ReviewFn,
                 metrics: WebhookMetrics | None = None) -> None:
        self.certificates = certificates
        self.review_fn = review_fn
        self.metrics = metrics or WebhookMetrics()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        raw, address = self.socket.accept()
        raw.settimeout(10)
        # Headers and body leave in separate writes: on a keep-alive connection (the apiserver's),
        # Nagle's algorithm would hold the body until the client's delayed ACK, 40 ms per review.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The handshake happens on first read, in the worker thread: a slow client cannot stall accept().
        return self.certificates.current().wrap_socket(raw, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Failed handshakes (plain HTTP, wrong CA) are the client's problem, not a traceback on stderr.
        log.debug("connection from %s failed", client_address, exc_info=True)

    @property
    def url(self) -> str:
        """``https://host:port``."""
        host, port = self.server_address[:2]
        return f"https://{host!s}:{port}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: WebhookServer
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path in ("/healthz", "/readyz"):
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": f"no such path {self.path}"})

    def do_POST(self) -> None:
        started = time.perf_counter()
        if self.path.split("?", 1)[0] != "/mutate-pv":
            self._send(404, {"error": f"no such path {self.path}"})
            return
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            declared = self.headers.get("Content-Length")
            self._send(413 if length > MAX_BODY else 400, {"error": f"bad Content-Length {declared!r}"})
            return
        body = self.rfile.read(length)
        try:
            answer = self.server.review_fn(body)
        except reviews.MalformedReview as exc:
            self.server.metrics.reviews.labels("malformed").inc()
            self._send(400, {"error": str(exc)})
            return
        except Exception as exc:  # never crash the server: answer 500 with the reason
            log.exception("review failed")
            self.server.metrics.reviews.labels("error").inc()
            self._send(500, {"error": f"review failed: {type(exc).__name__}"})
            return
        response = answer.get("response", {})
        result = "patched" if response.get("patch") else ("denied" if not response.get("allowed") else "allowed")
        self.server.metrics.reviews.labels(result).inc()
        self.server.metrics.latency.observe(time.perf_counter() - started)
        self._send(200, answer)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s - " + format, self.address_string(), *args)


def serve(*, host: str, port: int, cert_file: str, key_file: str, review_fn: ReviewFn,
          metrics: WebhookMetrics | None = None) -> WebhookServer:
    """Start the server in a daemon thread and return it (``shutdown()`` stops it)."""
    server = WebhookServer((host, port), certificates=CertificateReloader(cert_file, key_file), review_fn=review_fn,
                           metrics=metrics)
    threading.Thread(target=server.serve_forever, daemon=True, name="webhook").start()
    log.info("webhook serving on %s", server.url)
    return server
