"""Reading a watch response: newline-delimited JSON events from a urllib3 response, stoppable from any thread.

Part of the `cloudzones.kube` adapter (which re-exports the public names); it never imports the
``kubernetes`` package, only the urllib3 response the client hands back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3

from cloudzones import documents, errors, shapes


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK; ``object`` the manifest dict."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        """``object.metadata.resourceVersion`` (``""`` when absent)."""
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


def error_from_status(status: Mapping[str, Any], what: str, *,
                      retry_after: float | None = None) -> errors.KubeApiError:
    """Our error for an apiserver ``Status`` (from an HTTP error body or a watch ERROR event)."""
    code = status.get("code")
    code = code if isinstance(code, int) else None
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "")
    text = f"{what} failed with HTTP {code}" + (f" ({reason})" if reason else "") + (f": {message}" if message else "")
    if retry_after is None:
        details = status.get("details")
        retry_after = details.get("retryAfterSeconds") if isinstance(details, Mapping) else None
    cls: type[errors.KubeApiError] = errors.KubeApiError
    if code == 409:
        cls = errors.KubeAlreadyExists if reason == "AlreadyExists" else errors.KubeConflict
    elif code == 404:
        cls = errors.KubeNotFound
    elif code == 410:
        cls = errors.KubeGone
    return cls(text, status=code, retry_after=retry_after, reason=reason)


class WatchStream:
    """The events of one watch response; iterate once. `stop` (from any thread) ends the iteration quietly."""

    def __init__(self, response: Any, *, what: str) -> None:
        self._response = response
        self._what = what
        self._stopped = threading.Event()
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        buffer = bytearray()
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                buffer.extend(chunk)
                while (end := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[:end + 1]
                    if line.strip():
                        yield self._event(line)
                if self._stopped.is_set():
                    return
            if buffer.strip():
                yield self._event(bytes(buffer))
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if self._stopped.is_set():
                return
            raise errors.KubeApiError(f"{self._what} broke off: {exc}") from exc
        finally:
            self.close()

    def _event(self, line: bytes) -> WatchEvent:
        try:
            data = documents.peer_json(line)
            kind, obj = data["type"], data["object"]
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.KubeApiError(f"{self._what} sent a line that is not a watch event: {line[:200]!r}") from exc
        if kind == "ERROR":
            raise error_from_status(obj if isinstance(obj, Mapping) else {}, self._what)
        if not isinstance(obj, dict):
            raise errors.KubeApiError(f"{self._what} sent a {kind!r:.40} event whose object is "
                                      f"{shapes.describe(obj)}, not a mapping")
        return WatchEvent(kind, obj)

    def stop(self) -> None:
        """End the stream from another thread: the iteration returns without an error."""
        self._stopped.set()
        connection = getattr(self._response, "connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            # Unblocks a reader waiting in recv(); closing the response is left to the reading thread.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    @property
    def stopped(self) -> bool:
        """Whether `stop` was called."""
        return self._stopped.is_set()

    def close(self) -> None:
        """Release the connection (closing it: a half-read watch cannot be reused)."""
        if not self._closed:
            self._closed = True
            self._response.close()
            self._response.release_conn()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
