"""A kubeconfig checked around the kubernetes client's loader, so that a wrong one is one line at start-up.

The client's loader crashes on wrong shapes (``'int' object is not iterable`` for ``clusters: 5``), and takes a
server that is not a URL or TLS data that is not a certificate without a word, failing only at the first
request: a service would start, report its retries, and never work. `check_files` reads each file through the
one input loader and checks the fields the client reads; `check_configuration` checks what it made of them.
"""

from __future__ import annotations

import os
import ssl
import urllib.parse
from collections.abc import Callable
from typing import Any

from cloudzones import documents, errors, shapes
from cloudzones.shapes import ListOf, MapOf

SCHEMA: dict[str, Any] = {
    "clusters": ListOf({"name": str, "cluster": {
        "server": str, "certificate-authority": str, "certificate-authority-data": str,
        "insecure-skip-tls-verify": bool, "proxy-url": str, "tls-server-name": str}}),
    "users": ListOf({"name": str, "user": {
        "token": str, "tokenFile": str, "client-certificate": str, "client-certificate-data": str,
        "client-key": str, "client-key-data": str, "username": str, "password": str,
        "exec": {"command": str, "args": ListOf(str), "env": ListOf({"name": str, "value": str}), "apiVersion": str},
        "auth-provider": {"name": str, "config": MapOf(str)}}}),
    "contexts": ListOf({"name": str, "context": {"cluster": str, "user": str, "namespace": str}}),
    "current-context": str,
}
"""The fields the kubernetes client reads, with their types (others are ignored, as the client ignores them)."""


def check_files(path: str | None) -> None:
    """Each file of ``path`` (``os.pathsep``-separated, as ``$KUBECONFIG``), or ``~/.kube/config`` if present:
    one mapping whose fields have the types the client expects; `documents.InputError` naming the field."""
    for each in (path or os.path.expanduser("~/.kube/config")).split(os.pathsep):
        if not each or not (path or os.path.exists(each)):
            continue
        loaded = documents.load_all(each, what="kubeconfig")
        if len(loaded) != 1 or not isinstance(loaded[0], dict):
            got = shapes.describe(loaded[0]) if len(loaded) == 1 else f"{len(loaded)} documents"
            raise documents.InputError(f"kubeconfig {each}: expected a mapping (apiVersion: v1, kind: Config), "
                                       f"got {got}")
        try:
            shapes.check(loaded[0], SCHEMA)
        except shapes.ShapeError as exc:
            raise documents.InputError(f"kubeconfig {each}: {exc}") from None


def check_configuration(config: Any, source: str) -> None:
    """What the client made of the kubeconfig: a server URL it can connect to, TLS files that load.

    ``config`` is a ``kubernetes.client.Configuration``; ``source`` names the kubeconfig in the error.
    """
    host = str(config.host or "")
    try:
        parts = urllib.parse.urlsplit(host)
        _ = parts.port  # raises for a port that is not a number from 0 to 65535
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # that port, or a broken IPv6 literal
        usable = False
    if not usable:
        raise errors.ConfigError(f"kubeconfig {source}: server {host!r:.80} is not an http:// or https:// URL "
                                 "with a host")
    if config.ssl_ca_cert:
        _load_tls(source, "certificate authority", lambda: ssl.create_default_context(cafile=config.ssl_ca_cert))
    if config.cert_file:
        _load_tls(source, "client certificate and key",
                  lambda: ssl.create_default_context().load_cert_chain(config.cert_file, config.key_file))


def _load_tls(source: str, what: str, load: Callable[[], object]) -> None:
    try:
        load()
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise errors.ConfigError(f"kubeconfig {source}: its {what}: not PEM that loads ({reason})") from None
