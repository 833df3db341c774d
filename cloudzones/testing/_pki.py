"""A throwaway certificate authority: CA, server and client certificates, for loopback tests only.

EC P-256 keys throughout: generated in a millisecond, accepted by Go's TLS stack, the Python ``ssl``
module and the Kubernetes API server (client certificates and service-account signing keys alike).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def private_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """PKCS#8 PEM of a private key, unencrypted (test material only)."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_key(path: pathlib.Path, key: ec.EllipticCurvePrivateKey) -> pathlib.Path:
    """Write ``key`` to ``path``, readable by its owner only."""
    path.write_bytes(private_key_pem(key))
    path.chmod(0o600)
    return path


@dataclasses.dataclass(frozen=True)
class Issued:
    """A certificate and its key, in PEM files."""

    cert_file: pathlib.Path
    key_file: pathlib.Path


class Authority:
    """A self-signed CA that issues server and client certificates into a folder."""

    def __init__(self, folder: pathlib.Path, *, name: str = "cloudzones test CA", days: int = 2) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        self._start, self._end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
        self._key = ec.generate_private_key(ec.SECP256R1())
        usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                              key_encipherment=False, data_encipherment=False, key_agreement=False,
                              encipher_only=False, decipher_only=False)
        self.cert = (self._builder(_name(name), self._key.public_key(), _name(name))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(usage, critical=True)
                     .sign(self._key, hashes.SHA256()))
        self.ca_file = folder / "ca.pem"
        self.ca_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def _builder(self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey,
                 issuer: x509.Name | None = None) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or self.cert.subject)
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(self._start).not_valid_after(self._end))

    def issue(self, stem: str, common_name: str, *, hosts: tuple[str, ...] = (), organizations: tuple[str, ...] = (),
              client: bool = False) -> Issued:
        """A certificate for ``hosts`` (server) or for a client identity (``organizations`` become its groups)."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = self._builder(_name(common_name, organizations), key.public_key())
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        purpose = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        cert = builder.add_extension(x509.ExtendedKeyUsage([purpose]), critical=False).sign(self._key, hashes.SHA256())
        cert_file = self.folder / f"{stem}.crt"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return Issued(cert_file, write_key(self.folder / f"{stem}.key", key))
