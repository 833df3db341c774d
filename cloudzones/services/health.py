"""Plain-HTTP ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz`` for the controller, node agent and webhook.

Readiness says why: ``ready()`` returns ``""`` when the service can do its work, else the reason, which
``/readyz`` sends with its 503 (``kubectl describe pod`` shows it in the probe's failure event).

We keep the standard library's ``http.server`` here (three GET paths, no bodies to read): what it lacks
for a probe port is set below and tested: a listen backlog that takes 200 simultaneous scrapes
(``request_queue_size``; the default of 5 made the kubelet's probes time out under a scrape burst),
one request per connection (HTTP/1.0, so no idle keep-alive connection holds a thread), a socket
timeout so a client that connects and says nothing is dropped, and client resets logged as one
debug line instead of socketserver's traceback on stderr (which broke ``--log-format json``).
"""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Readiness = Callable[[], str]
"""``""`` when ready, else why not."""


class HealthServer(http.server.ThreadingHTTPServer):
    """Serves the registry and two probes; ``ready()`` decides readiness, ``alive()`` liveness."""

    daemon_threads = True
    request_queue_size = 1024
    """Listen backlog: a burst of scrapes waits in the kernel instead of being refused."""

    def __init__(self, address: tuple[str, int], *, registry: CollectorRegistry, ready: Readiness = lambda: "",
                 alive: Callable[[], bool] = lambda: True, timeout: float = 5.0) -> None:
        self.registry, self.ready, self.alive, self.client_timeout = registry, ready, alive, timeout
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> HealthServer:
        """Serve from a daemon thread."""
        threading.Thread(target=self.serve_forever, daemon=True, name="health").start()
        return self

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A scraper that resets or times out is not an error of ours: one debug line, no traceback.
        log.debug("health client %s went away", client_address, exc_info=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: HealthServer
    protocol_version = "HTTP/1.0"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.client_timeout)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body, status, kind = generate_latest(self.server.registry), 200, CONTENT_TYPE_LATEST
        elif path == "/healthz":
            ok = self.server.alive()
            body, status, kind = (b"ok\n" if ok else b"not alive\n"), (200 if ok else 503), "text/plain"
        elif path == "/readyz":
            reason = self.server.ready()
            body = b"ok\n" if not reason else f"not ready: {reason}\n".encode()
            status, kind = (200 if not reason else 503), "text/plain; charset=utf-8"
        else:
            body, status, kind = b"not found\n", 404, "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass
