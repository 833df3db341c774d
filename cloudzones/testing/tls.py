"""Throwaway TLS material for loopback servers: a CA and a server certificate for 127.0.0.1 / localhost.

The webhook serves TLS only, and the Azure SDK refuses bearer tokens over plain HTTP, so every
loopback fake that stands in for them needs a certificate its client can verify.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """PEM files on disk: the CA to trust, and the server's certificate and key."""

    ca_file: pathlib.Path
    cert_file: pathlib.Path
    key_file: pathlib.Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_tls_files(directory: str | pathlib.Path | None = None, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                   days: int = 2) -> TlsFiles:
    """Write a fresh CA and a server certificate for ``hosts`` into ``directory`` (a new temp dir by default)."""
    folder = pathlib.Path(directory or tempfile.mkdtemp(prefix="cloudzones-tls-"))
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("cloudzones test CA")
    usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False)
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(usage, critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = TlsFiles(folder / "ca.pem", folder / "tls.crt", folder / "tls.key")
    files.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()))
    files.key_file.chmod(0o600)
    return files
