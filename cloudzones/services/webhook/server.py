"""The webhook's HTTPS server: ``POST /mutate-pv`` (AdmissionReview), ``GET /healthz``; TLS 1.2+ only.

Certificates are read from files and reloaded when they change (cert-manager rotates them in
place), checked at most once a second and applied to new connections. The handler never lets an
exception escape: a malformed body gets 400 with the reason, anything else a valid review.

Why the standard library's ``http.server`` (a thread per connection) and not a server package or
asyncio: the API server is our only client, it sends one small JSON body per request with a
Content-Length over a keep-alive TLS connection, mostly one at a time, and a review may block on an
ARM call. Here a review runs in its connection's thread, lookup included (~4,800 reviews/s on one
connection, ~8,500 at 16, bench/webhook.py); an asyncio prototype answered 1.5-2.4x more at 4-16 busy
connections but must hand every lookup to a thread and back, which halved one-connection throughput.
What a library would add is the hostile-client hygiene, which is set here and tested
(tests/test_webhook_limits.py):

- a request must be read and answered within `ServerLimits.request_seconds` of its first byte (a
  slowloris client trickling one header byte at a time is cut off), an idle keep-alive connection
  (or one that never completes its TLS handshake) is closed after `ServerLimits.idle_seconds`;
- with a `budget.ReviewBudget`, a review not done in time gets the budget's answer instead;
- at most `ServerLimits.connections` connections at once; more are closed at once;
- ``Transfer-Encoding`` (chunked) bodies are refused with 411, never parsed as a next request;
- every error, including unknown methods, is a JSON body.
"""

from __future__ import annotations

import dataclasses
import http.server
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from cloudzones import errors
from cloudzones.services.webhook import handler
from cloudzones.services.webhook.budget import ReviewBudget
from cloudzones.services.webhook.deadlines import Deadlines

log = logging.getLogger(__name__)

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


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    """What one client may cost the webhook."""

    request_seconds: float = 10.0
    """From a request's first byte to its last: headers and body must arrive within this."""
    idle_seconds: float = 120.0
    """A keep-alive connection with no request for this long is closed (the API server reconnects)."""
    connections: int = 256
    """Connections served at once; one more is closed at once."""


class WebhookServer(http.server.ThreadingHTTPServer):
    """HTTPS only: every accepted connection is wrapped with the current certificate before any byte is read.

    ``deadlines`` is the reaper of every connection's deadlines (its own by default; a test passes one on a
    fake clock); ``budget`` bounds each review (`budget.ReviewBudget`).
    """

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], *, certificates: CertificateReloader, review_fn: ReviewFn,
                 metrics: WebhookMetrics | None = None, limits: ServerLimits | None = None,
                 budget: ReviewBudget | None = None, deadlines: Deadlines | None = None) -> None:
        self.certificates = certificates
        self.review_fn = review_fn
        self.metrics = metrics or WebhookMetrics()
        self.limits = limits or ServerLimits()
        if budget is not None and budget.seconds >= self.limits.request_seconds:
            raise errors.ConfigError(f"the review budget ({budget.seconds:g} s) must be shorter than the request "
                                     f"deadline ({self.limits.request_seconds:g} s), or no late answer is ever sent")
        self.budget = budget
        self._slots = threading.BoundedSemaphore(self.limits.connections)
        self.refused_connections = 0
        self.closing = False
        """Set by `server_close`: connections end instead of waiting for another request."""
        self.date = handler.HttpDate()
        # Before binding: a failed bind calls server_close(), which stops the reaper.
        self.deadlines = deadlines or Deadlines()
        super().__init__(address, handler.Handler)

    def server_close(self) -> None:
        """Stop listening and close every connection: idle ones at once, busy ones cut where they are."""
        self.closing = True
        self.deadlines.close()
        super().server_close()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused_connections += 1
            log.warning("more than %d connections at once: closing one from %s", self.limits.connections,
                        client_address)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def get_request(self) -> tuple[socket.socket, Any]:
        raw, address = self.socket.accept()
        # Blocking, no timeout: the deadlines' reaper bounds idle time, handshake and request (deadlines.py).
        raw.settimeout(None)
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


def serve(*, host: str, port: int, cert_file: str, key_file: str, review_fn: ReviewFn,
          metrics: WebhookMetrics | None = None, limits: ServerLimits | None = None,
          budget: ReviewBudget | None = None) -> WebhookServer:
    """Start the server in a daemon thread and return it (``shutdown()`` stops it).

    With a ``budget``, a review not done within ``budget.seconds`` is answered ``budget.late_answer``.
    """
    server = WebhookServer((host, port), certificates=CertificateReloader(cert_file, key_file), review_fn=review_fn,
                           metrics=metrics, limits=limits, budget=budget)
    threading.Thread(target=server.serve_forever, daemon=True, name="webhook").start()
    log.info("webhook serving on %s", server.url)
    return server
