"""Tests for the public Azure fakes, driven by the real SDK: FakeArm over loopback HTTPS and FakeImds."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import responses
import urllib3

from cloudzones import errors
from cloudzones.testing._loopback import LoopbackServer
from cloudzones.testing.azure import FakeArm, FakeImds
from cloudzones.topology import Topology
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from tests.conftest import FakeClock, FakeCredential

SUB = "11111111-2222-3333-4444-555555555555"


def build_arm() -> FakeArm:
    """A small mixed inventory: one uniform scale set, one flex VM, one unzoned standalone VM."""
    arm = FakeArm(subscription=SUB, resource_group="rg", location="eastus")
    arm.add_scale_set("pool", prefix="aks-pool-vmss")
    arm.add_scale_set_vm("pool", 10, zone="2")
    arm.add_vm("flex-vm-1", zone="3", computer_name="flexnode1", scale_set="flexpool")
    arm.add_vm("legacy", zone=None, fault_domain=36)
    return arm


@pytest.fixture(scope="module")
def served_arm() -> Iterator[FakeArm]:
    """FakeArm on loopback HTTPS with a throwaway CA."""
    arm = build_arm().start()
    yield arm
    arm.stop()


def provider_for(arm: FakeArm, clock: FakeClock | None = None) -> AzureProvider:
    """A real AzureProvider pointed at the fake over TLS."""
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "eastus"}, environ={})
    clock = clock or FakeClock()
    assert arm.tls is not None
    return AzureProvider(config, credential=FakeCredential(), resource_manager_url=arm.url,
                         connection_verify=str(arm.tls.ca_file), clock=clock, sleep=clock.sleep,
                         arm_settings=ArmSettings(backoff_factor=0.0, polling_interval=0.0))


class TestFakeArmLoopback:
    """The real SDK resolves zones and manages disks against FakeArm over HTTPS."""

    def test_lookups(self, served_arm: FakeArm) -> None:
        """Uniform, flex and unzoned nodes resolve by provider ID and by name."""
        provider = provider_for(served_arm)
        base = f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute"
        assert provider.topology_by_provider_id(f"{base}/virtualMachineScaleSets/pool/virtualMachines/10") == Topology("eastus", "eastus-2", "0")
        assert provider.topology_by_node_name("aks-pool-vmss00000a").zone == "eastus-2"
        assert provider.topology_by_node_name("flexnode1").zone == "eastus-3"
        assert provider.topology_by_provider_id(f"{base}/virtualMachines/legacy") == Topology("eastus", "36", "36")
        with pytest.raises(errors.NodeNotFound):
            provider.topology_by_node_name("nobody")

    def test_disk_lifecycle(self, served_arm: FakeArm) -> None:
        """Create (LRO), find again without a PUT, delete."""
        provider = provider_for(served_arm)
        disk, created = provider.ensure_disk("pvc-abc", 8, "Premium_LRS", "eastus-1", {"k": "v"})
        assert created and disk.zones == ("1",)
        puts = served_arm.calls[("PUT", "disks")]
        assert provider.ensure_disk("pvc-abc", 8, "Premium_LRS", "eastus-1")[1] is False
        assert served_arm.calls[("PUT", "disks")] == puts
        assert provider.labels_for_volume({"spec": {"csi": {"driver": "disk.csi.azure.com", "volumeHandle": disk.id}}})[
            "topology.kubernetes.io/zone"] == "eastus-1"
        assert provider.delete_disk("pvc-abc") is True and "pvc-abc" not in served_arm.disks

    def test_throttle_injection(self, served_arm: FakeArm) -> None:
        """An injected 429 reaches the provider's gate with its Retry-After."""
        provider = provider_for(served_arm)
        served_arm.throttle_next(1, retry_after=9, match="virtualMachines/legacy")
        base = f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute"
        with pytest.raises(errors.CloudApiError) as info:
            provider.topology_by_provider_id(f"{base}/virtualMachines/legacy")
        assert info.value.retry_after == 9

    def test_own_ca_removed_on_stop(self) -> None:
        """Started without TLS files, the fake makes a CA and removes it when stopped."""
        arm = build_arm().start()
        assert arm.tls is not None and arm.tls.key_file.exists()
        arm.stop()
        assert not arm.tls.ca_file.parent.exists()


class TestFakeArmResponses:
    """FakeArm also serves through responses, without sockets."""

    @responses.activate
    def test_register(self) -> None:
        """The same inventory answers through a RequestsMock."""
        arm = build_arm()
        arm.register(responses.mock)
        config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg"}, environ={})
        clock = FakeClock()
        provider = AzureProvider(config, credential=FakeCredential(), clock=clock, sleep=clock.sleep)
        assert provider.topology_by_node_name("aks-pool-vmss00000a").zone == "eastus-2"
        assert arm.calls[("GET", "scaleSetVMs")] == 1


class TestFakeImds:
    """FakeImds serves each machine its own document and enforces IMDS's rules."""

    def test_per_machine(self) -> None:
        """Two machines, two answers; unknown machine 404; faults injected."""
        imds = FakeImds()
        imds.add_machine("a", location="eastus", zone="1")
        imds.add_machine("b", location="eastus", zone="", fault_domain=2)
        imds.start()
        try:
            config = AzureConfig.from_mapping({}, environ={})
            assert AzureProvider(config, imds_url=imds.url_for("a")).local_topology().zone == "eastus-1"
            assert AzureProvider(config, imds_url=imds.url_for("b")).local_topology().zone == "2"
            with pytest.raises(errors.MetadataError, match="HTTP 404"):
                AzureProvider(config, imds_url=imds.url_for("c")).local_topology()
            imds.fail_next(1, status=410)
            clock = FakeClock()
            assert AzureProvider(config, imds_url=imds.url_for("a"), clock=clock, sleep=clock.sleep).local_topology().zone == "eastus-1"
            assert imds.calls["a"] == 3
        finally:
            imds.stop()

    def test_requires_metadata_header(self) -> None:
        """Without Metadata: true, IMDS answers 400."""
        imds = FakeImds()
        status, _, _ = imds.handle("GET", "/node/a/metadata/instance?api-version=2021-10-01", {})
        assert status == 400


class TestLoopbackServer:
    """The loopback HTTP(S) server behind FakeArm and FakeImds."""

    def test_answers_are_not_held_by_nagle(self) -> None:
        """Its connections get TCP_NODELAY: a keep-alive answer's body does not wait for the client's delayed ACK."""
        loop = LoopbackServer(lambda method, path, headers, body: (200, {}, b""))
        server = loop._server
        try:
            with socket.create_server(("127.0.0.1", 0)) as listener, \
                    socket.create_connection(listener.getsockname()) as client:
                served, address = listener.accept()
                with served:
                    client.shutdown(socket.SHUT_WR)  # no request: the handler sets the connection up, then returns
                    server.RequestHandlerClass(served, address, server)
                    assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            server.server_close()


class TestLoopbackWrites:
    """The loopback server behind FakeArm sends each answer in one write (one TLS record)."""

    def test_one_write_per_answer(self, server_writes: list[int]) -> None:
        """A list and a 404 over TLS: one write each, headers included."""
        arm = build_arm().start()
        try:
            assert arm.tls is not None
            pool = urllib3.PoolManager(ca_certs=str(arm.tls.ca_file))
            scope = f"{arm.url}/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute"
            for path, code in ((f"{scope}/virtualMachines", 200), (f"{scope}/virtualMachines/nope", 404)):
                server_writes.clear()
                response = pool.request("GET", path)
                assert response.status == code
                assert len(server_writes) == 1 and server_writes[0] > len(response.data) > 0
        finally:
            arm.stop()
