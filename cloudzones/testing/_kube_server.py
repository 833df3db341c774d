"""HTTP/1.1 front of the fake API server: routing, verbs, ``Status`` errors, faults and the request log.

Watch streams live in `_kube_watch`; objects in `_kube_store`; discovery documents in `_kube_discovery`.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cloudzones.testing import _kube_discovery as discovery
from cloudzones.testing import _kube_faults as faults
from cloudzones.testing import _kube_selectors as selectors
from cloudzones.testing import _kube_status as status
from cloudzones.testing import _kube_watch as watch
from cloudzones.testing._json_tree import to_json
from cloudzones.testing._kube_store import KubeStore

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Route:
    """What a request asks for, once its URL and method are understood."""

    verb: str
    rtype: status.ResourceType
    namespace: str
    name: str
    subresource: str

    @property
    def resource(self) -> str:
        """``nodes``, or ``nodes/status`` for the subresource, as fault rules and the log name it."""
        return f"{self.rtype.plural}/{self.subresource}" if self.subresource else self.rtype.plural


def route(method: str, path: str, query: dict[str, str]) -> Route:
    """Map a method and URL path to a `Route`; `ApiStatusError` 404/405 when the fake does not serve it."""
    parts = [unquote(part) for part in path.split("/") if part]
    missing = status.ApiStatusError(404, f"the server could not find the requested resource ({method} {path})")
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise missing
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3 or rest[0] not in status.RESOURCES:
        raise missing
    rtype = status.RESOURCES[rest[0]]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if (rtype.group, rtype.version) != (group, version) or (namespace and not rtype.namespaced):
        raise missing
    if (name and rtype.namespaced and not namespace) or subresource not in ("", "status"):
        raise missing
    if subresource and not rtype.has_status:
        raise missing
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
        if not verb or (verb == "create") == bool(name) or (verb == "create" and rtype.namespaced and not namespace):
            raise status.ApiStatusError(405, f"{method} is not allowed on {path}")
    return Route(verb, rtype, namespace, name, subresource)


def _item_key(obj: dict[str, Any]) -> list[str]:
    meta = obj.get("metadata") or {}
    return [str(meta.get("namespace") or ""), str(meta.get("name") or "")]


def _continue_token(query: dict[str, str]) -> tuple[int, list[str]] | None:
    """The resourceVersion and last key of a ``continue`` token; None without one; 400 for a garbled one."""
    if not query.get("continue"):
        return None
    try:
        token = json.loads(base64.urlsafe_b64decode(query["continue"]))
        return int(token["rv"]), list(token["start"])
    except (ValueError, KeyError, TypeError):
        raise status.ApiStatusError(400, f"continue key is not valid: {query['continue']!r}") from None


def _page(items: list[dict[str, Any]], rv: int, query: dict[str, str],
          after: list[str] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The slice of a sorted list that ``limit`` and ``continue`` ask for, and the List's metadata.

    ``items`` are the objects as of ``rv``, the first page's version, as the apiserver shows every
    page of a list; ``after`` is the last key the previous page showed.
    """
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise status.ApiStatusError(400, f"limit must be an integer, got {query['limit']!r}") from None
    if after is not None:
        items = [item for item in items if _item_key(item) > after]
    metadata: dict[str, Any] = {"resourceVersion": str(rv)}
    if 0 < limit < len(items):
        token = {"rv": rv, "start": _item_key(items[limit - 1])}
        metadata.update({"continue": base64.urlsafe_b64encode(json.dumps(token).encode()).decode(),
                         "remainingItemCount": len(items) - limit})
        items = items[:limit]
    return items, metadata


class Server(ThreadingHTTPServer):
    """The listening socket; one thread per connection; tracks connections so `stop` can cut them."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: KubeStore, book: faults.FaultBook,
                 hub: watch.WatchHub) -> None:
        self.store = store
        self.book = book
        self.hub = hub
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._connection_threads: list[threading.Thread] = []
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own, remembered for `stop`."""
        # Headers and body go out in separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every answer.
        with contextlib.suppress(OSError):
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        thread = threading.Thread(target=self._serve_connection, args=(request, client_address), daemon=True,
                                  name="fake-kube-api-connection")
        with self._lock:
            self._connections.add(request)
            self._connection_threads = [t for t in self._connection_threads if t.is_alive()] + [thread]
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._connections.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up is normal here; anything else is logged, never printed."""
        logger.debug("fake API server connection from %s ended with an error", client_address, exc_info=True)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening, cut every open connection and wait for the connection threads."""
        self.stopping.set()
        self.hub.wake()
        self.shutdown()
        with self._lock:
            connections, threads = list(self._connections), list(self._connection_threads)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one write (http.server flushes after each request; watch streams flush
    # each chunk themselves): two writes cost a syscall each, on both sides, for every answer.
    wbufsize = 64 * 1024
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("fake API server: " + format, *args)

    def do_GET(self) -> None:
        """Get, list or watch."""
        self._dispatch()

    def do_POST(self) -> None:
        """Create."""
        self._dispatch()

    def do_PUT(self) -> None:
        """Update."""
        self._dispatch()

    def do_PATCH(self) -> None:
        """Patch."""
        self._dispatch()

    def do_DELETE(self) -> None:
        """Delete."""
        self._dispatch()

    # -- plumbing ----------------------------------------------------------------------------
    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        content_type = self.headers.get("Content-Type", "")
        if url.path.rstrip("/") in ("/version", "/healthz", "/readyz", "/livez"):
            self._send_json(200, {"major": "1", "minor": "37", "gitVersion": "v1.37.2-cloudzones-fake"}
                            if url.path.rstrip("/") == "/version" else {"status": "ok"})
            return
        host, port = self.server.server_address[:2]
        address = f"{host!s}:{port}"
        found = (discovery.document(url.path.rstrip("/"), address)
                 or discovery.openapi(url.path.rstrip("/"))) if self.command == "GET" else None
        if found is not None:
            self._send_json(200, found)
            return
        # Every request is logged before its answer leaves, so a test that got the answer sees the entry.
        target = None
        try:
            target = route(self.command, url.path, query)
            delay = self.server.book.latency(target.verb, target.resource)
            if delay:
                self.server.stopping.wait(delay)
            fault = self.server.book.take_fault(target.verb, target.resource)
            if fault is not None:
                self._log(target, query, content_type, 0 if fault.disconnect else fault.status)
                self._inject(fault, target)
                return
            if target.verb == "watch":
                options = watch.parse_options(query, target.rtype)
                self._log(target, query, content_type, 200)
                watch.stream(self, store=self.server.store, hub=self.server.hub, rtype=target.rtype,
                             namespace=target.namespace, options=options)
                return
            code, payload = self._execute(target, query, raw, content_type)
        except status.ApiStatusError as exc:
            self._log(target, query, content_type, exc.code)
            self._send_error(exc)
            return
        self._log(target, query, content_type, code)
        self._send_json(code, payload)

    def _log(self, target: Route | None, query: dict[str, str], content_type: str, code: int) -> None:
        self.server.book.record(faults.RequestRecord(
            method=self.command, path=urlsplit(self.path).path, verb=target.verb if target else "",
            resource=target.resource if target else "", namespace=target.namespace if target else "",
            name=target.name if target else "", query=query, content_type=content_type, status=code,
            headers={k.lower(): v for k, v in self.headers.items()}))

    def _inject(self, fault: faults.Fault, target: Route) -> None:
        if fault.disconnect:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        message = fault.message or f"injected fault: {target.verb} {target.resource} answers {fault.status}"
        error = status.ApiStatusError(fault.status, message, retry_after=fault.retry_after)
        if target.verb == "watch" and fault.status == 410:
            # The apiserver reports an expired watch inside a 200 stream, as an ERROR event.
            watch.send_error_stream(self, error)
        else:
            self._send_error(error)

    def _execute(self, target: Route, query: dict[str, str], raw: bytes, content_type: str) -> tuple[int, Any]:
        store, rtype = self.server.store, target.rtype
        if target.verb == "get":
            return 200, store.get(rtype.plural, target.name, target.namespace)
        if target.verb == "list":
            try:
                labels = selectors.label_matcher(query.get("labelSelector"))
                fields = selectors.field_matcher(query.get("fieldSelector"), rtype)
            except selectors.SelectorError as exc:
                raise status.ApiStatusError(400, str(exc)) from exc
            token = _continue_token(query)
            if token is None:
                items, rv = store.list(rtype.plural, target.namespace or None, lambda o: labels(o) and fields(o))
            else:
                rv = token[0]
                past = store.list_at(rtype.plural, target.namespace or None, lambda o: labels(o) and fields(o), rv)
                if past is None:
                    raise status.ApiStatusError(410, "The provided continue parameter is too old to display a "
                                                     "consistent list result. You can start a new list without "
                                                     "the continue parameter.")
                items = past
            items, metadata = _page(items, rv, query, None if token is None else token[1])
            if query.get("labelSelector") or query.get("fieldSelector"):
                metadata.pop("remainingItemCount", None)  # the apiserver cannot count a filtered rest
            # The apiserver leaves apiVersion and kind out of list items.
            return 200, {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": metadata,
                         "items": [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")}
                                   for item in items]}
        body = self._json_body(raw)
        subresource = target.subresource or None
        if target.verb == "create":
            return 201, store.create(rtype.plural, body, target.namespace or None)
        if target.verb == "update":
            return 200, store.update(rtype.plural, body, target.namespace or None, name=target.name,
                                     subresource=subresource)
        if target.verb == "patch":
            return 200, store.patch(rtype.plural, target.name, body, content_type, target.namespace or None,
                                    subresource=subresource)
        options = body if isinstance(body, dict) else {}
        last = store.delete(rtype.plural, target.name, target.namespace or None,
                            preconditions=options.get("preconditions"))
        # An object that finalizers keep is answered as it now stands, whatever the resource.
        return 200, last if (last.get("metadata") or {}).get("deletionTimestamp") else status.deleted(rtype, last)

    @staticmethod
    def _json_body(raw: bytes) -> Any:
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise status.ApiStatusError(400, f"the request body is not JSON: {exc}") from exc

    def _send_error(self, error: status.ApiStatusError) -> None:
        headers = {} if error.retry_after is None else {"Retry-After": str(int(error.retry_after))}
        self._send_json(error.code, error.status(), headers)

    def _send_json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = to_json(payload)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
