"""Tests for AWS and GCP metadata detection, auto-detection, and the no-proxy rule on real sockets."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import responses
from responses import matchers

from cloudzones import errors
from cloudzones.topology import Topology
from providers import aws, detect, gcp, get, metadata
from providers.azure import AzureConfig, AzureProvider
from tests.conftest import FakeClock, fixture_text

AWS = "http://169.254.169.254"
GCP = "http://metadata.google.internal"
TOKEN = fixture_text("imds/aws/api_token_synthetic.txt").strip()


class TestAws:
    """IMDSv2: token, then placement with the token."""

    def _placement(self) -> None:
        responses.get(f"{AWS}/latest/meta-data/placement/availability-zone",
                      body=fixture_text("imds/aws/placement_availability-zone.txt"),
                      match=[matchers.header_matcher({"X-aws-ec2-metadata-token": TOKEN})])
        responses.get(f"{AWS}/latest/meta-data/placement/region", body=fixture_text("imds/aws/placement_region.txt"),
                      match=[matchers.header_matcher({"X-aws-ec2-metadata-token": TOKEN})])

    @responses.activate
    def test_zone_and_region(self, clock: FakeClock) -> None:
        """The zone label is the AZ name; the region comes from placement/region."""
        responses.put(f"{AWS}/latest/api/token", body=TOKEN,
                      match=[matchers.header_matcher({"X-aws-ec2-metadata-token-ttl-seconds": "21600"})])
        self._placement()
        provider = aws.AwsProvider(clock=clock, sleep=clock.sleep)
        assert provider.local_topology() == Topology("us-west-2", "us-west-2b")
        assert TOKEN not in repr(provider)

    @responses.activate
    def test_401_refreshes_token_once(self, clock: FakeClock) -> None:
        """A 401 gets a fresh token and the read is repeated."""
        responses.put(f"{AWS}/latest/api/token", body="stale-token")
        responses.put(f"{AWS}/latest/api/token", body=TOKEN)
        responses.get(f"{AWS}/latest/meta-data/placement/availability-zone", status=401,
                      match=[matchers.header_matcher({"X-aws-ec2-metadata-token": "stale-token"})])
        self._placement()
        assert aws.AwsProvider(clock=clock, sleep=clock.sleep).local_topology().zone == "us-west-2b"

    @responses.activate
    def test_403_means_imds_off(self, clock: FakeClock) -> None:
        """A 403 on the token says IMDS is turned off."""
        responses.put(f"{AWS}/latest/api/token", status=403)
        with pytest.raises(errors.MetadataError, match="turned off"):
            aws.AwsProvider(clock=clock, sleep=clock.sleep).local_topology()

    def test_sdk_lookups_not_implemented(self) -> None:
        """Node lookups say clearly that they are not implemented."""
        with pytest.raises(NotImplementedError, match="node-agent"):
            aws.AwsProvider().topology_by_node_name("n")


class TestGcp:
    """GCP's instance/zone path."""

    @pytest.mark.parametrize(("fixture", "region", "zone"), [
        ("imds/gcp/instance_zone.txt", "us-central1", "us-central1-a"),
        ("imds/gcp/instance_zone_europe_synthetic.txt", "europe-west4", "europe-west4-b"),
    ])
    def test_parse(self, fixture: str, region: str, zone: str) -> None:
        """projects/N/zones/<zone> → region and zone."""
        assert gcp.topology_from_zone_path(fixture_text(fixture)) == Topology(region, zone)

    @pytest.mark.parametrize("body", ["", "us-central1-a", "projects/1/zones/", "projects/1/regions/us-central1"])
    def test_bad_body(self, body: str) -> None:
        """Anything else is a MetadataError quoting it."""
        with pytest.raises(errors.MetadataError):
            gcp.topology_from_zone_path(body)

    @responses.activate
    def test_request(self, clock: FakeClock) -> None:
        """GET with Metadata-Flavor: Google; the reply must carry it back."""
        responses.get(f"{GCP}/computeMetadata/v1/instance/zone", body=fixture_text("imds/gcp/instance_zone.txt"),
                      headers={"Metadata-Flavor": "Google"}, match=[matchers.header_matcher({"Metadata-Flavor": "Google"})])
        assert gcp.GcpProvider(clock=clock, sleep=clock.sleep).local_topology().zone == "us-central1-a"

    @responses.activate
    def test_impostor_refused(self, clock: FakeClock) -> None:
        """A reply without Metadata-Flavor did not come from GCP."""
        responses.get(f"{GCP}/computeMetadata/v1/instance/zone", body=fixture_text("imds/gcp/instance_zone.txt"))
        with pytest.raises(errors.MetadataError, match="Metadata-Flavor"):
            gcp.GcpProvider(clock=clock, sleep=clock.sleep).local_topology()


class _Failing:
    name = "failing"

    def local_topology(self) -> Topology:
        raise errors.MetadataError("nobody home")

    def topology_by_provider_id(self, provider_id: str) -> Topology | None:
        return None

    def topology_by_node_name(self, node_name: str) -> Topology:
        raise errors.NodeNotFound(node_name)


class _Answering(_Failing):
    name = "answering"

    def local_topology(self) -> Topology:
        return Topology("r", "r-1")


class TestDetect:
    """detect() asks every provider and reports who answered, or why none did."""

    def test_first_answer_wins(self) -> None:
        """The answering provider is chosen even after a failing one."""
        chosen, topology = detect([_Failing(), _Answering()])
        assert chosen.name == "answering" and topology.zone == "r-1"

    def test_none_answer(self) -> None:
        """All failing → MetadataError listing each reason."""
        with pytest.raises(errors.MetadataError, match="failing: nobody home"):
            detect([_Failing()])

    def test_get_unknown(self) -> None:
        """providers.get refuses unknown names."""
        with pytest.raises(errors.ConfigError, match="'openstack'"):
            get("openstack")


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers like IMDS (or, as a proxy trap, records whatever reaches it)."""

    seen: list[str]
    body = b""

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


def _serve(body: bytes) -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    seen: list[str] = []
    handler = type("Handler", (_Recorder,), {"seen": seen, "body": body})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def servers() -> Iterator[tuple[str, list[str], str, list[str]]]:
    """A loopback IMDS and a loopback proxy trap."""
    imds_server, imds_seen = _serve(fixture_text("imds/azure/instance_full_no_zone_vmss_docs.json").encode())
    trap, trap_seen = _serve(b"{}")
    yield (f"http://127.0.0.1:{imds_server.server_port}", imds_seen, f"http://127.0.0.1:{trap.server_port}", trap_seen)
    for server in (imds_server, trap):
        server.shutdown()
        server.server_close()


class TestNoProxy:
    """Metadata requests never go through a proxy, whatever the environment says."""

    def test_imds_bypasses_env_proxy(self, servers: tuple[str, list[str], str, list[str]],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """With HTTP_PROXY/HTTPS_PROXY/ALL_PROXY at a trap, IMDS is reached directly and the trap sees nothing."""
        imds_url, imds_seen, trap_url, trap_seen = servers
        for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(var, trap_url)
        for var in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(var, raising=False)
        provider = AzureProvider(AzureConfig.from_mapping({}, environ={}), imds_url=imds_url)
        assert provider.local_topology().zone == "36"
        assert trap_seen == [] and len(imds_seen) == 1

    def test_trap_would_catch_a_plain_client(self, servers: tuple[str, list[str], str, list[str]],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
        """Control: a session that trusts the environment does go through the trap, so the test above can fail."""
        import requests

        imds_url, _, trap_url, trap_seen = servers
        monkeypatch.setenv("HTTP_PROXY", trap_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        requests.get(f"{imds_url}/metadata/instance", timeout=5)
        assert len(trap_seen) == 1
        assert metadata.MetadataClient(service="x")._session.trust_env is False
