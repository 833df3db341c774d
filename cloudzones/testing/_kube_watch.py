"""Watch streams of the fake API server: chunked newline-delimited JSON events replayed from the store.

A stream starts from ``resourceVersion`` (unset or ``"0"``: synthetic ADDED events for what exists
now), replays the history newer than that, then follows new changes. A start older than the
retained history gets an ERROR event with a 410 ``Status``, as does a stream that falls behind it.
With ``allowWatchBookmarks`` the stream sends BOOKMARK events when asked (`WatchHub.bookmark`),
every ``bookmark_interval`` seconds if one is set, and just before ``timeoutSeconds`` ends it.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from cloudzones.testing import _kube_selectors as selectors
from cloudzones.testing import _kube_status as status
from cloudzones.testing._json_tree import to_json
from cloudzones.testing._kube_store import Event, KubeStore

DROP, CLOSE, EXPIRE = "drop", "close", "expire"
"""What a test can do to an open stream: cut the connection, end it cleanly, or end it with 410."""


@dataclasses.dataclass(frozen=True)
class WatchOptions:
    """The query parameters a watch honours."""

    resource_version: str
    bookmarks: bool
    timeout: float | None
    match: selectors.Matcher


def parse_options(query: Mapping[str, str], rtype: status.ResourceType) -> WatchOptions:
    """Read and check a watch's query; `ApiStatusError` 400 for a malformed one."""
    try:
        labels = selectors.label_matcher(query.get("labelSelector"))
        fields = selectors.field_matcher(query.get("fieldSelector"), rtype)
    except selectors.SelectorError as exc:
        raise status.ApiStatusError(400, str(exc)) from exc
    rv = query.get("resourceVersion", "")
    if rv not in ("", "0") and not rv.isdigit():
        # The apiserver answers a malformed resourceVersion with a 500 (reason-less), not a 400.
        raise status.ApiStatusError(500, f'resourceVersion: Invalid value: "{rv}": strconv.ParseUint: parsing '
                                         f'"{rv}": invalid syntax', reason="")
    timeout_text = query.get("timeoutSeconds")
    try:
        timeout = float(timeout_text) if timeout_text else None
    except ValueError as exc:
        raise status.ApiStatusError(400, f"timeoutSeconds must be a number, got {timeout_text!r}") from exc
    return WatchOptions(rv, query.get("allowWatchBookmarks") in ("true", "1"), timeout,
                        lambda obj: labels(obj) and fields(obj))


@dataclasses.dataclass(eq=False)
class WatchControl:
    """One open stream, as tests see it."""

    resource: str
    bookmarks: bool
    action: str | None = None
    bookmark_wanted: bool = False


class WatchHub:
    """The open streams, guarded by the store's condition so that one notify wakes everything."""

    def __init__(self, store: KubeStore, *, bookmark_interval: float | None = None) -> None:
        self.store = store
        self.bookmark_interval = bookmark_interval
        self.stopping = False
        self._controls: list[WatchControl] = []

    def register(self, control: WatchControl) -> None:
        """Add a stream (call with ``store.cond`` held)."""
        self._controls.append(control)
        self.store.cond.notify_all()

    def unregister(self, control: WatchControl) -> None:
        """Forget a stream that ended."""
        with self.store.cond:
            if control in self._controls:
                self._controls.remove(control)
            self.store.cond.notify_all()

    def act(self, action: str, resource: str | None = None) -> int:
        """Ask the open streams (of ``resource``, or all) to `DROP`, `CLOSE` or `EXPIRE`; returns how many."""
        with self.store.cond:
            chosen = [c for c in self._controls if resource in (None, c.resource) and c.action is None]
            for control in chosen:
                control.action = action
            self.store.cond.notify_all()
            return len(chosen)

    def bookmark(self, resource: str | None = None) -> int:
        """Ask the open bookmark-enabled streams to send a BOOKMARK now; returns how many."""
        with self.store.cond:
            chosen = [c for c in self._controls if resource in (None, c.resource) and c.bookmarks]
            for control in chosen:
                control.bookmark_wanted = True
            self.store.cond.notify_all()
            return len(chosen)

    def count(self, resource: str | None = None) -> int:
        """How many streams are open."""
        with self.store.cond:
            return sum(1 for c in self._controls if resource in (None, c.resource) and c.action is None)

    def wait_for(self, count: int, resource: str | None, timeout: float) -> bool:
        """Block until at least ``count`` streams are open; returns whether that happened in time."""
        with self.store.cond:
            return self.store.cond.wait_for(lambda: self.count(resource) >= count, timeout=timeout)

    def wake(self) -> None:
        """Make every stream look at the world again (used when the server stops)."""
        with self.store.cond:
            self.stopping = True
            self.store.cond.notify_all()


def _line(kind: str, obj: Mapping[str, Any]) -> bytes:
    return to_json({"type": kind, "object": obj}) + b"\n"


def _bookmark(rtype: status.ResourceType, rv: int) -> bytes:
    return _line("BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.api_version,
                              "metadata": {"resourceVersion": str(rv)}})


def _translate(event: Event, rtype: status.ResourceType, namespace: str, options: WatchOptions) -> bytes | None:
    """The line this stream sends for ``event``: a change of selection shows as ADDED or DELETED."""
    if event.resource != rtype.plural or (namespace and event.namespace != namespace):
        return None
    now = options.match(event.new)
    before = event.old is not None and options.match(event.old)
    if event.type == "DELETED":
        return _line("DELETED", event.new) if now or before else None
    if now and before:
        return _line("MODIFIED", event.new)
    if now:
        return _line("ADDED", event.new)
    if before:
        return _line("DELETED", event.new)
    return None


def _start(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    handler.wfile.flush()  # the client's watch call returns once it has the headers, before any event


def _write(handler: BaseHTTPRequestHandler, lines: list[bytes]) -> None:
    if lines:
        chunk = b"".join(lines)
        handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        handler.wfile.flush()


def _end(handler: BaseHTTPRequestHandler) -> None:
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def send_error_stream(handler: BaseHTTPRequestHandler, error: status.ApiStatusError) -> None:
    """A whole watch response that is one ERROR event (how the apiserver says 410 Gone)."""
    _start(handler)
    _write(handler, [_line("ERROR", error.status())])
    _end(handler)


def stream(handler: BaseHTTPRequestHandler, *, store: KubeStore, hub: WatchHub, rtype: status.ResourceType,
           namespace: str, options: WatchOptions) -> None:
    """Serve one watch until it times out, is told to end, the client leaves, or the server stops."""
    _Stream(handler, store=store, hub=hub, rtype=rtype, namespace=namespace, options=options).run()


class _Stream:
    """The state of one watch response while it is open."""

    def __init__(self, handler: BaseHTTPRequestHandler, *, store: KubeStore, hub: WatchHub,
                 rtype: status.ResourceType, namespace: str, options: WatchOptions) -> None:
        self.handler, self.store, self.hub = handler, store, hub
        self.rtype, self.namespace, self.options = rtype, namespace, options
        self.control = WatchControl(rtype.plural, options.bookmarks)
        self.cursor = 0
        now = time.monotonic()
        self.deadline = now + options.timeout if options.timeout else None
        self.interval = hub.bookmark_interval if options.bookmarks else None
        self.next_bookmark = now + self.interval if self.interval else None

    def run(self) -> None:
        """Send the start of the stream, then follow the store until something ends it."""
        lines: list[bytes] = []
        error: status.ApiStatusError | None = None
        with self.store.cond:
            if self.options.resource_version in ("", "0"):
                items, self.cursor = self.store.list(self.rtype.plural, self.namespace or None, self.options.match)
                lines = [_line("ADDED", obj) for obj in items]
            else:
                self.cursor = int(self.options.resource_version)
                if self.cursor < self.store.floor:
                    error = status.expired(self.cursor, self.store.floor)
            if error is None:
                self.hub.register(self.control)
        if error is not None:
            send_error_stream(self.handler, error)
            return
        try:
            _start(self.handler)
            _write(self.handler, lines)
            while self._step():
                pass
        except OSError:
            self.handler.close_connection = True  # the client went away
        finally:
            self.hub.unregister(self.control)

    def _ready(self) -> bool:
        now = time.monotonic()
        return (self.hub.stopping or self.control.action is not None or self.control.bookmark_wanted
                or self.store.resource_version > self.cursor
                or any(now >= t for t in (self.deadline, self.next_bookmark) if t is not None))

    def _step(self) -> bool:
        """Wait for something to happen and send it; False once the stream has ended."""
        lines: list[bytes] = []
        with self.store.cond:
            wakeups = [t for t in (self.deadline, self.next_bookmark) if t is not None]
            self.store.cond.wait_for(self._ready,
                                     timeout=max(0.0, min(wakeups) - time.monotonic()) if wakeups else None)
            action = DROP if self.hub.stopping else self.control.action
            if self.store.resource_version > self.cursor:
                if self.cursor < self.store.floor:
                    action = EXPIRE  # fell behind the retained history
                else:
                    lines = [line for event in self.store.events_after(self.cursor)
                             if (line := _translate(event, self.rtype, self.namespace, self.options)) is not None]
                    self.cursor = self.store.resource_version
            now = time.monotonic()
            bookmark = self.control.bookmark_wanted
            self.control.bookmark_wanted = False
            if self.next_bookmark is not None and self.interval and now >= self.next_bookmark:
                bookmark, self.next_bookmark = True, now + self.interval
            timed_out = self.deadline is not None and now >= self.deadline
        _write(self.handler, lines)
        if action == DROP:
            self.handler.close_connection = True
            self.handler.connection.shutdown(socket.SHUT_RDWR)
            return False
        if action == EXPIRE:
            _write(self.handler, [_line("ERROR", status.expired(self.cursor, self.store.floor).status())])
            _end(self.handler)
            return False
        if self.options.bookmarks and (bookmark or timed_out):
            _write(self.handler, [_bookmark(self.rtype, self.cursor)])
        if action == CLOSE or timed_out:
            _end(self.handler)
            return False
        return True
