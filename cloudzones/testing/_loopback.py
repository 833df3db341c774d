"""A tiny threaded HTTP(S) server on 127.0.0.1 that hands every request to one function."""

from __future__ import annotations

import http.server
import ssl
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones.testing.tls import TlsFiles

#: (method, path with query, headers, body) -> (status, headers, body)
Handler = Callable[[str, str, Mapping[str, str], bytes], tuple[int, Mapping[str, str], bytes]]


class LoopbackServer:
    """Serves ``handler`` from a daemon thread; ``url`` is where it listens."""

    def __init__(self, handler: Handler, *, tls: TlsFiles | None = None) -> None:
        outer = self

        class _Request(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else keep-alive answers wait 40 ms for the delayed ACK
            wbufsize = 64 * 1024  # headers and body in one write (one TLS record, one syscall)

            def _dispatch(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, payload = outer.handler(self.command, self.path, dict(self.headers.items()), body)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _dispatch

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.handler = handler
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Request)
        self._server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name=f"loopback-{self.url}")

    def start(self) -> LoopbackServer:
        """Start serving."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
