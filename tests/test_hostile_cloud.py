"""The cloud adapters against answers no cloud sends: not UTF-8, nested past what a JSON parser recurses into,
of the wrong shape. ARM, Azure IMDS and AWS/GCP metadata answers are input too: one `CloudApiError` or
`MetadataError` saying what was wrong (the CLI's one line, a service's logged retry), never a traceback that
kills a node agent's or a controller's thread."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from cloudzones import errors
from cloudzones.testing._loopback import LoopbackServer
from cloudzones.testing.tls import TlsFiles, make_tls_files
from providers.aws import AwsProvider
from providers.azure import AzureConfig, AzureProvider
from providers.gcp import GcpProvider
from tests.conftest import FakeCredential

SUB = "00000000-0000-0000-0000-000000000001"
VM = f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1"
SCALE_SET_VM = f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/" \
    "virtualMachines/0"
PV = {"metadata": {"name": "p"}, "spec": {"azureDisk": {
    "diskURI": f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/disks/d1", "diskName": "d1"}}}

ARM_ANSWERS = {
    "not UTF-8": b"\xff\xfe\x00bad\xc3",
    "nested past the parser": b"[" * 100_000 + b"]" * 100_000,
    "an object nested past the parser": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "a list": b"[1,2,3]",
    "a string": b'"x"',
    "fields of the wrong type": b'{"name": 5, "zones": 7, "location": 3, "value": "x", "properties": [], "sku": 1}',
    "nulls in lists": b'{"value": [null, 1, "x"], "zones": [null], "location": null, "properties": null}',
    "items of the wrong type": b'{"value": [{"name": 5, "zones": "1", "properties": "x", "id": 4}]}',
}
ARM_CALLS: dict[str, Callable[[AzureProvider], object]] = {
    "VM": lambda p: p.topology_by_provider_id(VM),
    "scale-set instance": lambda p: p.topology_by_provider_id(SCALE_SET_VM),
    "node by name": lambda p: p.topology_by_node_name("vm1"),
    "PV disk labels": lambda p: p.labels_for_volume(PV),
    "disk": lambda p: p.get_disk("d1"),
    "public IP": lambda p: p.network().get_public_ip("rg", "ip"),
    "load balancer": lambda p: p.network().get_load_balancer("rg", "lb"),
}
READ_AS_COERCED = {(call, answer) for call in ("public IP", "load balancer")
                   for answer in ("fields of the wrong type", "nulls in lists", "items of the wrong type")}
"""The network SDK's models turn 5 into "5" and skip what they do not know: such a body is read (and
`lb plan` shows the difference it makes), as the SDK reads it; it is not checked field by field."""
METADATA_ANSWERS = {
    "not UTF-8": b"\xff\xfe\x00bad\xc3",
    "nested past the parser": b"[" * 100_000 + b"]" * 100_000,
    "a list": b"[1,2,3]",
    "a JSON object": b'{"compute": {"location": "eastus", "zone": ["x"]}}',
}


class _Server:
    """Answers every request with ``body`` (and, for GCP, its Metadata-Flavor header)."""

    def __init__(self, tls: TlsFiles | None) -> None:
        self.body = b""
        self.server = LoopbackServer(self._answer, tls=tls).start()

    def _answer(self, method: str, path: str, headers: Mapping[str, str],
                body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        return 200, {"Content-Type": "application/json", "Metadata-Flavor": "Google"}, self.body


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA and a certificate for the loopback ARM."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def arm(tls: TlsFiles) -> Iterator[_Server]:
    """A loopback HTTPS server standing in for ARM."""
    server = _Server(tls)
    yield server
    server.server.stop()


@pytest.fixture(scope="module")
def metadata() -> Iterator[_Server]:
    """A loopback HTTP server standing in for a metadata service."""
    server = _Server(None)
    yield server
    server.server.stop()


def azure(url: str, ca_file: pathlib.Path | None = None) -> AzureProvider:
    """An AzureProvider whose ARM and IMDS are ``url``."""
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "eastus"}, environ={})
    return AzureProvider(config, credential=FakeCredential(), resource_manager_url=url, imds_url=url,
                         connection_verify=str(ca_file) if ca_file else None)


class TestHostileArm:
    """Every ARM read refuses an answer ARM could not have sent with one error naming the call."""

    @pytest.mark.parametrize("answer", ARM_ANSWERS, ids=str)
    @pytest.mark.parametrize("call", ARM_CALLS, ids=str)
    def test_one_error(self, arm: _Server, tls: TlsFiles, answer: str, call: str) -> None:
        """A CloudZonesError (one line), never another exception, and never a value made of the garbage."""
        arm.body = ARM_ANSWERS[answer]
        if (call, answer) in READ_AS_COERCED:
            ARM_CALLS[call](azure(arm.server.url, tls.ca_file))  # read, not raised: no traceback either
            return
        with pytest.raises(errors.CloudZonesError) as info:
            ARM_CALLS[call](azure(arm.server.url, tls.ca_file))
        assert "\n" not in str(info.value) and str(info.value)

    def test_nesting_is_named(self, arm: _Server, tls: TlsFiles) -> None:
        """JSON nested past the parser is said to be that, with the call it answered."""
        arm.body = ARM_ANSWERS["nested past the parser"]
        with pytest.raises(errors.CloudApiError, match=r"ARM get VM rg/vm1: the answer is JSON nested too deeply"):
            azure(arm.server.url, tls.ca_file).topology_by_provider_id(VM)

    def test_wrong_field_is_named(self, arm: _Server, tls: TlsFiles) -> None:
        """A scale set's instance list with a field of the wrong type names the field."""
        arm.body = ARM_ANSWERS["items of the wrong type"]
        with pytest.raises(errors.CloudApiError, match=r"unexpected answer: value\[0\]\.name: expected a string"):
            azure(arm.server.url, tls.ca_file).topology_by_provider_id(SCALE_SET_VM)


class TestHostileMetadata:
    """Instance metadata that no metadata service sends is a MetadataError, not a dead node agent."""

    @pytest.mark.parametrize("answer", METADATA_ANSWERS, ids=str)
    @pytest.mark.parametrize("cloud", ["azure", "aws", "gcp"])
    def test_one_error(self, metadata: _Server, answer: str, cloud: str) -> None:
        """Each cloud's local_topology refuses the answer with one line."""
        metadata.body = METADATA_ANSWERS[answer]
        url = metadata.server.url
        providers: dict[str, Callable[[], Any]] = {"azure": lambda: azure(url), "aws": lambda: AwsProvider(imds_url=url),
                                                   "gcp": lambda: GcpProvider(metadata_url=url)}
        with pytest.raises(errors.CloudZonesError) as info:  # MetadataError, or InvalidZone for a zone that is not one
            providers[cloud]().local_topology()
        assert "\n" not in str(info.value)

    def test_aws_token_is_not_echoed(self, metadata: _Server) -> None:
        """A session token that is not token text is refused without being shown (it is sent back in a header)."""
        metadata.body = "sécret\x00".encode()
        with pytest.raises(errors.MetadataError, match="not token text") as info:
            AwsProvider(imds_url=metadata.server.url).local_topology()
        assert "sécret" not in str(info.value)

    def test_aws_names_are_checked(self, metadata: _Server) -> None:
        """A token that is fine, then a zone that is not a zone name: refused, never written as a label."""
        metadata.body = b"us-east-1"  # the token, the zone and the region all read this body
        assert AwsProvider(imds_url=metadata.server.url).local_topology().zone == "us-east-1"
        metadata.body = b"Us_East-1"  # token text, not a zone name
        with pytest.raises(errors.MetadataError, match=r"AWS IMDS zone 'Us_East-1' is not a zone name"):
            AwsProvider(imds_url=metadata.server.url).local_topology()
