"""Throwaway TLS material for loopback servers: a CA and a server certificate for 127.0.0.1 / localhost.

The webhook serves TLS only, and the Azure SDK refuses bearer tokens over plain HTTP, so every
loopback fake that stands in for them needs a certificate its client can verify.
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile

from cloudzones.testing._pki import Authority


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """PEM files on disk: the CA to trust, and the server's certificate and key."""

    ca_file: pathlib.Path
    cert_file: pathlib.Path
    key_file: pathlib.Path


def make_tls_files(directory: str | pathlib.Path | None = None, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                   days: int = 2) -> TlsFiles:
    """Write a fresh CA and a server certificate for ``hosts`` into ``directory`` (a new temp dir by default)."""
    folder = pathlib.Path(directory or tempfile.mkdtemp(prefix="cloudzones-tls-"))
    authority = Authority(folder, days=days)
    issued = authority.issue("tls", hosts[0], hosts=hosts)
    return TlsFiles(authority.ca_file, issued.cert_file, issued.key_file)
