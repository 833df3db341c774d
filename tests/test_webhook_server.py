"""Tests for the webhook's TLS server: real TLS with a throwaway CA, bad bodies, reloads, old protocols."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import ssl
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import labels
from cloudzones.services.webhook import server as webhook_server
from cloudzones.services.webhook.review import review
from cloudzones.testing.tls import TlsFiles, make_tls_files
from tests.conftest import FakeClock, fixture_text

ZONED = {labels.REGION: "westus2", labels.ZONE: "westus2-1"}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA and a server certificate for 127.0.0.1."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def running(tls: TlsFiles) -> Iterator[webhook_server.WebhookServer]:
    """A webhook server on an ephemeral port."""
    srv = webhook_server.serve(host="127.0.0.1", port=0, cert_file=str(tls.cert_file), key_file=str(tls.key_file),
                               review_fn=lambda body: review(body, labels_for_volume=lambda pv: ZONED))
    yield srv
    srv.shutdown()
    srv.server_close()


def post(url: str, body: bytes, ca: pathlib.Path) -> tuple[int, dict[str, Any]]:
    """POST over verified TLS; returns status and JSON."""
    context = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class TestWebhookServer:
    """The server answers over TLS only and never falls over."""

    def test_review_over_tls(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """A real AdmissionReview gets a patched answer with the uid."""
        status, answer = post(f"{running.url}/mutate-pv", fixture_text("admission/pv-create-azuredisk.json").encode(), tls.ca_file)
        assert status == 200 and answer["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
        assert answer["response"]["patchType"] == "JSONPatch"
        samples = {s.name: s.value for m in running.metrics.registry.collect() for s in m.samples}
        assert samples["cloudzones_webhook_reviews_total"] == 1

    def test_malformed_is_400(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """A malformed body gets 400 with a reason, and the server keeps serving."""
        status, answer = post(f"{running.url}/mutate-pv", b"{not json", tls.ca_file)
        assert status == 400 and "not JSON" in answer["error"]
        assert post(f"{running.url}/mutate-pv", fixture_text("admission/pv-create-azuredisk.json").encode(), tls.ca_file)[0] == 200

    def test_unknown_path_404(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """Other paths are 404."""
        assert post(f"{running.url}/other", b"{}", tls.ca_file)[0] == 404

    def test_plain_http_refused(self, running: webhook_server.WebhookServer) -> None:
        """Plain HTTP gets no answer: the server speaks TLS only."""
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(running.url.replace("https", "http") + "/healthz", timeout=5)

    def test_tls_1_1_refused(self, running: webhook_server.WebhookServer, tls: TlsFiles) -> None:
        """A client limited to TLS 1.1 cannot connect."""
        import warnings

        context = ssl.create_default_context(cafile=str(tls.ca_file))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # we are deliberately the outdated client
            context.minimum_version = ssl.TLSVersion.TLSv1
            context.maximum_version = ssl.TLSVersion.TLSv1_1
        with pytest.raises((ssl.SSLError, urllib.error.URLError)):
            urllib.request.urlopen(f"{running.url}/healthz", context=context, timeout=5)
        # The client's own OpenSSL may refuse 1.1 too, so also check what the server insists on.
        assert running.certificates.current().minimum_version == ssl.TLSVersion.TLSv1_2

    def test_crashing_review_is_500(self, tls: TlsFiles) -> None:
        """An unexpected exception in review becomes a 500, not a dead server."""
        def boom(body: bytes) -> dict[str, Any]:
            raise RuntimeError("bug")
        srv = webhook_server.serve(host="127.0.0.1", port=0, cert_file=str(tls.cert_file), key_file=str(tls.key_file), review_fn=boom)
        try:
            assert post(f"{srv.url}/mutate-pv", b"{}", tls.ca_file)[0] == 500
            assert post(f"{srv.url}/mutate-pv", b"{}", tls.ca_file)[0] == 500
        finally:
            srv.shutdown()
            srv.server_close()

    def test_answers_are_not_held_by_nagle(self, tls: TlsFiles) -> None:
        """Accepted connections have TCP_NODELAY: a keep-alive answer's body does not wait for the client's ACK."""
        srv = webhook_server.WebhookServer(("127.0.0.1", 0), certificates=webhook_server.CertificateReloader(
            str(tls.cert_file), str(tls.key_file)), review_fn=lambda body: {})
        try:
            with socket.create_connection(srv.server_address[:2], timeout=5):
                accepted, _ = srv.get_request()
                with accepted:
                    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            srv.server_close()


class TestCertificateReloader:
    """Certificates are reloaded when their files change; a broken pair keeps the old one."""

    def test_reload(self, tmp_path: pathlib.Path) -> None:
        """A rotated certificate is picked up after the check interval."""
        first, second = make_tls_files(tmp_path / "a"), make_tls_files(tmp_path / "b")
        live = tmp_path / "live"
        live.mkdir()
        shutil.copy(first.cert_file, live / "tls.crt")
        shutil.copy(first.key_file, live / "tls.key")
        clock = FakeClock()
        reloader = webhook_server.CertificateReloader(str(live / "tls.crt"), str(live / "tls.key"), clock=clock)
        original = reloader.current()
        shutil.copy(second.cert_file, live / "tls.crt")
        shutil.copy(second.key_file, live / "tls.key")
        os.utime(live / "tls.crt", (1, 10**9 + 5))
        assert reloader.current() is original  # not yet checked again
        clock.advance(2)
        assert reloader.current() is not original and reloader.reloads == 1

    def test_broken_pair_keeps_old(self, tmp_path: pathlib.Path) -> None:
        """A half-written rotation (cert without matching key) keeps serving the old certificate."""
        files = make_tls_files(tmp_path / "a")
        clock = FakeClock()
        reloader = webhook_server.CertificateReloader(str(files.cert_file), str(files.key_file), clock=clock)
        original = reloader.current()
        files.key_file.write_text("garbage")
        clock.advance(2)
        assert reloader.current() is original
