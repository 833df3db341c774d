"""Plain-HTTP ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz`` for the controller and the node agent."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class HealthServer(http.server.ThreadingHTTPServer):
    """Serves the registry and two probes; ``ready()`` decides readiness, liveness is "the loop is alive"."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, registry: CollectorRegistry,
                 ready: Callable[[], bool] = lambda: True, alive: Callable[[], bool] = lambda: True) -> None:
        self.registry, self.ready, self.alive = registry, ready, alive
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


class _Handler(http.server.BaseHTTPRequestHandler):
    server: HealthServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body, status, kind = generate_latest(self.server.registry), 200, CONTENT_TYPE_LATEST
        elif path in ("/healthz", "/readyz"):
            ok = self.server.alive() if path == "/healthz" else self.server.ready()
            body, status, kind = (b"ok\n" if ok else b"not ready\n"), (200 if ok else 503), "text/plain"
        else:
            body, status, kind = b"not found\n", 404, "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass
