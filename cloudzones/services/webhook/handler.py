"""One HTTP/1.1 exchange of the webhook server: read a request, review it, write one answer.

Parsed here rather than by ``http.server``: its header parsing goes through ``email.parser`` (a fifth
of the handler's time), and its answers leave in two writes. What is parsed is what the API server
sends: a request line, ``Name: value`` headers (no folding), a Content-Length body. Anything else is a
JSON error, and the connection is closed.

Sockets block without a timeout; the server's `deadlines.Deadlines` shuts down a connection idle
past ``idle_seconds`` or whose request is not read and answered within ``request_seconds``, and
answers a review past its `budget.ReviewBudget` with the budget's late answer.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import http.server
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

import orjson

from cloudzones.services.webhook import review as reviews

if TYPE_CHECKING:
    from cloudzones.services.webhook.budget import ReviewBudget, ReviewFn
    from cloudzones.services.webhook.server import WebhookServer

# The server's logger: what an exchange logs was logged under that name before the handler had its own module.
log = logging.getLogger("cloudzones.services.webhook.server")

MAX_BODY = 3 * 1024 * 1024
"""The API server sends at most a few hundred KiB; refuse more rather than buffer it."""


class HttpDate:
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


class Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive exchanges on one connection (see the module docstring for what is accepted)."""

    server: WebhookServer
    protocol_version = "HTTP/1.1"
    fields: dict[str, str]
    """The current request's header fields, by lower-case name."""

    def setup(self) -> None:
        super().setup()
        # What the reaper does to this connection, made once per connection rather than per request.
        self._close_idle = functools.partial(_shut, self.connection, None)
        self._close_late = functools.partial(_shut, self.connection, "a request was not read and answered within "
                                             f"{self.server.limits.request_seconds:g} s")

    def handle_one_request(self) -> None:
        # Wait for a request as long as an idle keep-alive connection may, then give the whole request
        # (line, headers, body) a fixed time: a per-read timeout alone lets a client trickle forever.
        if self.server.closing:
            self.close_connection = True
            return
        deadlines, limits = self.server.deadlines, self.server.limits
        idle = deadlines.add(limits.idle_seconds, self._close_idle)
        try:
            first = self.rfile.peek(1) if hasattr(self.rfile, "peek") else b"x"
        except (OSError, ValueError):
            self.close_connection = True
            return
        finally:
            deadlines.remove(idle)
        if not first:
            self.close_connection = True
            return
        token = deadlines.add(limits.request_seconds, self._close_late)
        try:
            self._serve_one()
        except _BadRequest as exc:
            self.send_error(exc.code, str(exc))
        except (OSError, ValueError):  # timeouts, resets, TLS errors, a socket the reaper shut down
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
        budget = self.server.budget
        if budget is None:
            self._answer(*_outcome(self.server.review_fn, body), started)
            return
        late = _LateAnswer(self, budget, body, started)
        token = self.server.deadlines.add(budget.seconds, late.start)
        try:
            outcome = _outcome(self.server.review_fn, body)
        finally:
            self.server.deadlines.remove(token)
        if late.claim():
            self._answer(*outcome, started)
        else:  # the budget's answer went out (with Connection: close): this one is dropped
            self.close_connection = True

    def _answer(self, status: int, payload: dict[str, Any], result: str, started: float) -> None:
        self.server.metrics.reviews.labels(result).inc()
        if status == 200:
            self.server.metrics.latency.observe(time.perf_counter() - started)
        self._send(status, payload)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s - " + format, self.address_string(), *args)


def _outcome(review_fn: ReviewFn, body: bytes) -> tuple[int, dict[str, Any], str]:
    """Status, payload and metric result of reviewing ``body``; never raises."""
    try:
        answer = review_fn(body)
    except reviews.MalformedReview as exc:
        return 400, {"error": str(exc)}, "malformed"
    except Exception as exc:  # never crash the server: answer 500 with the reason
        log.exception("review failed")
        return 500, {"error": f"review failed: {type(exc).__name__}"}, "error"
    response = answer.get("response", {})
    return 200, answer, "patched" if response.get("patch") else ("denied" if not response.get("allowed") else "allowed")


def _shut(connection: socket.socket, why: str | None) -> None:
    """Shut a connection down from the reaper: its thread's blocked read or write returns at once."""
    if why:
        log.warning("%s: closing its connection", why)
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class _LateAnswer:
    """A review's answer is sent by whichever comes first: the review, or its budget running out.

    The late answer is written holding the lock, so the review's own thread, claiming after it, waits
    until that answer is out before closing the connection (closing sooner could cut it off).
    """

    def __init__(self, handler: Handler, budget: ReviewBudget, body: bytes, started: float) -> None:
        self._handler, self._budget, self._body, self._started = handler, budget, body, started
        self._lock = threading.Lock()
        self._taken = False

    def claim(self) -> bool:
        """True for the review's thread if the late answer has not been sent (nor begun): it answers."""
        with self._lock:
            taken, self._taken = self._taken, True
            return not taken

    def start(self) -> None:
        """The budget ran out (on the reaper's thread): answer from a thread of its own, as a write may block."""
        threading.Thread(target=self._send, daemon=True, name="webhook-late-answer").start()

    def _send(self) -> None:
        with self._lock:
            if self._taken:  # the review finished between the deadline and this thread
                return
            self._taken = True
            handler, budget = self._handler, self._budget
            log.warning("a review took longer than its %g s budget: answering it without the cloud's answer",
                        budget.seconds)
            # The connection's own thread is still in the review: close rather than read the next request.
            handler.close_connection = True
            status, payload, result = _outcome(budget.late_answer, self._body)
            try:
                handler._answer(status, payload, "late" if status == 200 else result, self._started)
            except (OSError, ValueError):
                log.debug("the late answer could not be written", exc_info=True)
