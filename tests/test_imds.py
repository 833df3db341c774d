"""Tests for Azure IMDS: parsing every documented shape, the HTTP contract, retries and budgets."""

from __future__ import annotations

from typing import Any

import pytest
import requests
import responses
from responses import matchers

from cloudzones import errors
from cloudzones.topology import Topology
from providers import metadata
from providers.azure import AzureConfig, AzureProvider, topology_from_imds
from tests.conftest import FakeClock, fixture_body

URL = "http://169.254.169.254/metadata/instance"
QUERY = {"api-version": "2021-10-01", "format": "json"}


def imds_body(compute: str, network: str | None = "imds/azure/network_docs.json") -> dict[str, Any]:
    """A full /metadata/instance body built around a documented compute section."""
    body: dict[str, Any] = {"compute": fixture_body(compute)}
    if network:
        body["network"] = fixture_body(network)
    return body


def provider(clock: FakeClock, **settings: Any) -> AzureProvider:
    """An AzureProvider whose IMDS client runs on the fake clock."""
    return AzureProvider(AzureConfig.from_mapping({}, environ={}), clock=clock, sleep=clock.sleep, rand=lambda: 1.0,
                         metadata_settings=metadata.MetadataSettings(**settings))


class TestTopologyFromImds:
    """topology_from_imds covers every IMDS shape in the fixtures."""

    @pytest.mark.parametrize(("fixture", "expected"), [
        ("imds/azure/compute_zone3_docs.json", Topology("westus", "westus-3", "36")),
        ("imds/azure/compute_zone1_otel.json", Topology("westus", "westus-1", "0")),
        ("imds/azure/instance_full_no_zone_vmss_docs.json", Topology("westus", "36", "36")),
        ("imds/azure/GetInstanceMetadata_2021-11-15.spec-example.json",
         Topology("westus", "36", "36", sub_fault_domain="15")),
        ("imds/azure/instance_legacy_2017-04-02_no_zone_docs.json", Topology("westcentralus", "0", "0")),
    ])
    def test_fixtures(self, fixture: str, expected: Topology) -> None:
        """Zoned VMs get <region>-<zone>; unzoned ones (zone empty or absent) their fault domain."""
        assert topology_from_imds(fixture_body(fixture)) == expected

    def test_full_document_with_zone(self) -> None:
        """A full body wrapping a zoned compute section."""
        topology = topology_from_imds(imds_body("imds/azure/compute_zone3_docs.json"))
        assert topology.is_availability_zone and topology.zone == "westus-3"

    def test_fault_domain_never_a_zone(self) -> None:
        """An unzoned VM's fault domain '0' is not an availability zone."""
        topology = topology_from_imds(fixture_body("imds/azure/instance_legacy_2017-04-02_no_zone_docs.json"))
        assert not topology.is_availability_zone

    def test_missing_compute(self) -> None:
        """No compute section → MetadataError."""
        with pytest.raises(errors.MetadataError, match="no compute section"):
            topology_from_imds({"network": fixture_body("imds/azure/network_docs.json")})

    @pytest.mark.parametrize("zone", ["a", " 1", "1_0", "+2", "-1"])
    def test_bad_zone(self, zone: str) -> None:
        """A zone that is not an integer → InvalidZone naming it."""
        body = fixture_body("imds/azure/compute_zone3_docs.json") | {"zone": zone}
        with pytest.raises(errors.InvalidZone) as info:
            topology_from_imds(body)
        assert repr(zone) in str(info.value)

    def test_leading_zero_zone(self) -> None:
        """'01' is zone 1."""
        body = fixture_body("imds/azure/compute_zone3_docs.json") | {"zone": "01", "location": "EastUS"}
        assert topology_from_imds(body).zone == "eastus-1"

    @pytest.mark.parametrize("body", [{"compute": "x"}, {"compute": {"zone": "1"}}, [], {"compute": {"location": "x"}},
                                      {"compute": {"location": "x", "zone": 1}}])
    def test_malformed(self, body: Any) -> None:
        """Malformed documents raise contract errors, never a crash."""
        with pytest.raises((errors.MetadataError, errors.InvalidZone)):
            topology_from_imds(body)


class TestImdsHttp:
    """local_topology speaks IMDS's HTTP contract."""

    @responses.activate
    def test_request_shape(self, clock: FakeClock) -> None:
        """GET with Metadata: true, api-version 2021-10-01 and format=json."""
        responses.get(URL, json=imds_body("imds/azure/compute_zone1_otel.json"),
                      match=[matchers.query_param_matcher(QUERY), matchers.header_matcher({"Metadata": "true"})])
        assert provider(clock).local_topology().zone == "westus-1"

    @responses.activate
    @pytest.mark.parametrize("status", [410, 429, 500, 503])
    def test_transient_status_retried(self, clock: FakeClock, status: int) -> None:
        """410/429/500/503 are retried with backoff, then the answer is used."""
        responses.get(URL, status=status, json={"error": "warming up"})
        responses.get(URL, json=imds_body("imds/azure/compute_zone3_docs.json"))
        assert provider(clock).local_topology().zone == "westus-3"
        assert len(responses.calls) == 2 and clock.sleeps == [0.1]

    @responses.activate
    def test_retry_after_honoured(self, clock: FakeClock) -> None:
        """A Retry-After on 429 sets the wait."""
        responses.get(URL, status=429, headers={"Retry-After": "1"})
        responses.get(URL, json=imds_body("imds/azure/compute_zone3_docs.json"))
        provider(clock).local_topology()
        assert clock.sleeps == [1.0]

    @responses.activate
    def test_retry_after_beyond_budget_fails_at_once(self, clock: FakeClock) -> None:
        """A Retry-After longer than the budget fails loudly without waiting."""
        responses.get(URL, status=429, headers={"Retry-After": "60"})
        with pytest.raises(errors.MetadataError, match="60.0s"):
            provider(clock).local_topology()
        assert clock.sleeps == []

    @responses.activate
    @pytest.mark.parametrize("status", [400, 404])
    def test_client_errors_not_retried(self, clock: FakeClock, status: int) -> None:
        """400 and 404 are final: one request, MetadataError with IMDS's message."""
        responses.get(URL, status=status, json=fixture_body("imds/azure/error_400_api_version_missing_docs.json"))
        with pytest.raises(errors.MetadataError, match=f"HTTP {status}: Bad request. api-version"):
            provider(clock).local_topology()
        assert len(responses.calls) == 1

    @responses.activate
    def test_persistent_500_bounded(self, clock: FakeClock) -> None:
        """A service that keeps failing is given up on after the attempt budget."""
        responses.get(URL, status=500)
        with pytest.raises(errors.MetadataError, match="HTTP 500"):
            provider(clock).local_topology()
        assert len(responses.calls) == 4

    @responses.activate
    def test_invalid_json(self, clock: FakeClock) -> None:
        """A non-JSON 200 is a MetadataError."""
        responses.get(URL, body="<html>")
        with pytest.raises(errors.MetadataError, match="invalid JSON"):
            provider(clock).local_topology()

    @responses.activate
    def test_off_azure_gives_up_under_two_seconds(self, clock: FakeClock) -> None:
        """When nothing accepts the connection, detection gives up within the 1.5 s connect budget."""

        def blackhole(request: requests.PreparedRequest) -> Any:
            connect_timeout = request.req_kwargs["timeout"][0]  # type: ignore[attr-defined]
            clock.advance(connect_timeout)  # what a dropped SYN costs
            raise requests.exceptions.ConnectTimeout("timed out")

        responses.add_callback(responses.GET, URL, callback=blackhole)
        start = clock.now
        with pytest.raises(errors.MetadataError, match="cannot connect"):
            provider(clock).local_topology()
        assert clock.now - start < 2.0
        assert len(responses.calls) >= 2

    @responses.activate
    def test_silent_peer_gives_up_under_six_seconds(self, clock: FakeClock) -> None:
        """When something accepts but never answers, detection gives up within the 5 s total budget."""

        def silent(request: requests.PreparedRequest) -> Any:
            clock.advance(request.req_kwargs["timeout"][1])  # type: ignore[attr-defined]
            raise requests.exceptions.ReadTimeout("read timed out")

        responses.add_callback(responses.GET, URL, callback=silent)
        start = clock.now
        with pytest.raises(errors.MetadataError, match="no answer"):
            provider(clock).local_topology()
        assert clock.now - start < 6.0

