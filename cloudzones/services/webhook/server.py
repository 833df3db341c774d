"""The webhook's HTTPS server: ``POST /mutate-pv`` (AdmissionReview), ``GET /healthz``; TLS 1.2+ only.

Certificates are read from files and reloaded when they change (cert-manager rotates them in
place), checked at most once a second and applied to new connections. The handler never lets an
exception escape: a malformed body gets 400 with the reason, anything else a valid review.

Why the standard library's ``http.server`` and not a server package: the API server is our only
client, it sends one small JSON body per request with a Content-Length over a keep-alive TLS
connection, and this server already answers ~2,800 reviews/s (bench/webhook.py); what a library
would add is the hostile-client hygiene, which is set here and tested (tests/test_webhook_limits.py):

- a request must arrive whole within `ServerLimits.request_seconds` of its first byte (a slowloris
  client trickling one header byte at a time is cut off), an idle keep-alive connection is closed after
  `ServerLimits.idle_seconds`;
- at most `ServerLimits.connections` connections at once; more are closed at once;
- ``Transfer-Encoding`` (chunked) bodies are refused with 411, never parsed as a next request;
- every error, including unknown methods, is a JSON body.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import http.server
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
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


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    """What one client may cost the webhook."""

    request_seconds: float = 10.0
    """From a request's first byte to its last: headers and body must arrive within this."""
    idle_seconds: float = 120.0
    """A keep-alive connection with no request for this long is closed (the API server reconnects)."""
    connections: int = 256
    """Connections served at once; one more is closed at once."""


class _Deadlines:
    """Connections whose current request must be complete by a time; one reaper thread shuts down the late ones.

    One thread for the server rather than a timer per request: at thousands of reviews a second a
    timer thread each would cost more than the reviews.
    """

    def __init__(self, *, tick: float = 0.25) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[float, socket.socket]] = {}
        self._next = 0
        self._tick = tick
        self._stop = threading.Event()
        self.cut = 0
        """Connections shut down for being late."""
        threading.Thread(target=self._reap, daemon=True, name="webhook-deadlines").start()

    def add(self, connection: socket.socket, seconds: float) -> int:
        with self._lock:
            self._next += 1
            self._pending[self._next] = (time.monotonic() + seconds, connection)
            return self._next

    def remove(self, token: int) -> None:
        with self._lock:
            self._pending.pop(token, None)

    def stop(self) -> None:
        self._stop.set()

    def _reap(self) -> None:
        while not self._stop.wait(self._tick):
            now = time.monotonic()
            with self._lock:
                late = [(t, c) for t, (due, c) in self._pending.items() if due <= now]
                for token, _ in late:
                    del self._pending[token]
            for _, connection in late:
                self.cut += 1
                log.warning("a request took too long to arrive: closing its connection")
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)


class WebhookServer(http.server.ThreadingHTTPServer):
    """HTTPS only: every accepted connection is wrapped with the current certificate before any byte is read."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], *, certificates: CertificateReloader, review_fn: ReviewFn,
                 metrics: WebhookMetrics | None = None, limits: ServerLimits | None = None) -> None:
        self.certificates = certificates
        self.review_fn = review_fn
        self.metrics = metrics or WebhookMetrics()
        self.limits = limits or ServerLimits()
        self._slots = threading.BoundedSemaphore(self.limits.connections)
        self.refused_connections = 0
        self.date = _HttpDate()
        # Before binding: a failed bind calls server_close(), which stops the reaper.
        self.deadlines = _Deadlines()
        super().__init__(address, _Handler)

    def server_close(self) -> None:
        self.deadlines.stop()
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
        raw.settimeout(self.limits.idle_seconds)
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


class _HttpDate:
    """The ``Date`` header value, formatted once a second rather than once a response."""

    def __init__(self) -> None:
        self._second = -1
        self._value = ""

    def __call__(self) -> str:
        now = int(time.time())
        if now != self._second:
            self._value, self._second = email.utils.formatdate(now, usegmt=True), now
        return self._value


_MAX_LINE = 65536
_MAX_HEADERS = 100


class _BadRequest(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, parsed here rather than by ``http.server``: its header parsing goes through
    ``email.parser`` (a fifth of the handler's time), and its answers leave in two writes.

    What is parsed is what the API server sends: a request line, ``Name: value`` headers (no
    folding), a Content-Length body. Anything else is a JSON error, and the connection is closed.
    """

    server: WebhookServer
    protocol_version = "HTTP/1.1"
    fields: dict[str, str]
    """The current request's header fields, by lower-case name."""

    def handle_one_request(self) -> None:
        # Wait for a request as long as an idle keep-alive connection may, then give the whole request
        # (line, headers, body) a fixed time: a per-read timeout alone lets a client trickle forever.
        self.connection.settimeout(self.server.limits.idle_seconds)
        try:
            first = self.rfile.peek(1) if hasattr(self.rfile, "peek") else b"x"
        except (OSError, ValueError):
            self.close_connection = True
            return
        if not first:
            self.close_connection = True
            return
        self.connection.settimeout(self.server.limits.request_seconds)
        token = self.server.deadlines.add(self.connection, self.server.limits.request_seconds)
        try:
            self._serve_one()
        except _BadRequest as exc:
            self.send_error(exc.code, str(exc))
        except (TimeoutError, ConnectionError, ssl.SSLError, ValueError):
            self.close_connection = True
        finally:
            self.server.deadlines.remove(token)

    def _serve_one(self) -> None:
        self.request_version, self.fields = "HTTP/1.1", {}
        line = self.rfile.readline(_MAX_LINE + 1)
        if not line:
            self.close_connection = True
            return
        if len(line) > _MAX_LINE:
            raise _BadRequest(414, "request line too long")
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
            raise _BadRequest(400, f"bad request line {line[:80]!r}")
        self.command, self.path, self.request_version = parts
        self.requestline = line.decode("latin-1").rstrip("\r\n")
        self.fields = self._read_fields()
        connection = self.fields.get("connection", "").lower()
        self.close_connection = connection == "close" or (self.request_version == "HTTP/1.0"
                                                          and connection != "keep-alive")
        if self.fields.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        handler = getattr(self, f"do_{self.command}", None)
        if handler is None or not self.command.isupper():
            raise _BadRequest(501, f"unsupported method {self.command[:20]!r}")
        handler()

    def _read_fields(self) -> dict[str, str]:
        """Header fields by lower-case name; a repeated Content-Length that disagrees is refused (smuggling)."""
        fields: dict[str, str] = {}
        for _ in range(_MAX_HEADERS + 1):
            line = self.rfile.readline(_MAX_LINE + 1)
            if len(line) > _MAX_LINE:
                raise _BadRequest(431, "header line too long")
            if line in (b"\r\n", b"\n", b""):
                return fields
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                raise _BadRequest(400, f"bad header line {line[:80]!r}")
            key, value = name.lower(), value.strip()
            if key == "content-length" and fields.get(key, value) != value:
                raise _BadRequest(400, "conflicting Content-Length headers")
            fields[key] = value
        raise _BadRequest(431, f"more than {_MAX_HEADERS} header lines")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # Every error, ours or the base class's, as JSON; the connection is not trusted after one.
        self.close_connection = True
        self._send(code, {"error": message or self.responses.get(code, ("error",))[0], "code": code})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        # One write per answer: headers and body together (two writes cost a TLS record and a syscall each).
        body = orjson.dumps(payload)
        reason = self.responses.get(status, ("",))[0]
        closing = "Connection: close\r\n" if self.close_connection else ""
        head = (f"HTTP/1.1 {status} {reason}\r\nDate: {self.server.date()}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n{closing}\r\n")
        self.wfile.write(head.encode("latin-1") + body)
        log.debug("webhook %s %s %s -> %d", self.client_address[0] if self.client_address else "-", self.command,
                  self.path, status)

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
        if self.fields.get("transfer-encoding"):
            # The API server always sends a Content-Length; a chunked body left unread would be taken
            # for the next request on this connection.
            self.close_connection = True
            self._send(411, {"error": "send the body with a Content-Length, not Transfer-Encoding"})
            return
        if self.fields.get("content-length") is None:
            self.close_connection = True
            self._send(411, {"error": "a Content-Length is required"})
            return
        try:
            length = int(self.fields.get("content-length") or "0")
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            declared = self.fields.get("content-length")
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
          metrics: WebhookMetrics | None = None, limits: ServerLimits | None = None) -> WebhookServer:
    """Start the server in a daemon thread and return it (``shutdown()`` stops it)."""
    server = WebhookServer((host, port), certificates=CertificateReloader(cert_file, key_file), review_fn=review_fn,
                           metrics=metrics, limits=limits)
    threading.Thread(target=server.serve_forever, daemon=True, name="webhook").start()
    log.info("webhook serving on %s", server.url)
    return server
