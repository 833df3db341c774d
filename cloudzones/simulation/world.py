"""The emulated cloud and cluster of a simulation: FakeArm (HTTPS), FakeImds and FakeKubeApi on loopback."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import tempfile
from collections.abc import Iterator

from cloudzones import kube
from cloudzones.simulation.scenario import Machine, Scenario
from cloudzones.testing.azure import FakeArm, FakeImds, StaticCredential
from cloudzones.testing.kubeapi import FakeKubeApi
from cloudzones.testing.tls import TlsFiles, make_tls_files
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings

SIMULATED_SECRET = "sim-secret-" + secrets.token_hex(8)
"""The client secret the simulated cloud config carries; it must never appear in any log line."""


@dataclasses.dataclass
class World:
    """Everything a simulation step talks to."""

    scenario: Scenario
    arm: FakeArm
    imds: FakeImds
    api: FakeKubeApi
    client: kube.KubeClient
    tls: TlsFiles

    def provider(self, *, imds_node: str | None = None) -> AzureProvider:
        """A real AzureProvider against the fakes (``imds_node``: whose IMDS it reads)."""
        # A client secret is configured (though the injected credential is used) so that the
        # simulation also proves secrets never reach a log.
        config = AzureConfig.from_mapping({"subscriptionId": self.scenario.subscription,
                                           "resourceGroup": self.scenario.resource_group,
                                           "location": self.scenario.region, "tenantId": "simulated-tenant",
                                           "aadClientId": "simulated-client", "aadClientSecret": SIMULATED_SECRET},
                                          environ={})
        return AzureProvider(config, credential=StaticCredential(), resource_manager_url=self.arm.url,
                             connection_verify=str(self.tls.ca_file),
                             imds_url=self.imds.url_for(imds_node) if imds_node else "http://127.0.0.1:9",
                             arm_settings=ArmSettings(polling_interval=0.05))

    def provider_id(self, machine: Machine) -> str:
        """The ``spec.providerID`` the cloud-node-manager would set."""
        base = (f"azure:///subscriptions/{self.scenario.subscription}/resourceGroups/{self.scenario.resource_group}"
                "/providers/Microsoft.Compute")
        if machine.kind == "vmss":
            return f"{base}/virtualMachineScaleSets/{machine.group}/virtualMachines/{machine.instance}"
        return f"{base}/virtualMachines/{machine.node}"


def _populate(world: World) -> None:
    scenario, arm, imds = world.scenario, world.arm, world.imds
    for group in sorted({m.group for m in scenario.machines if m.kind == "vmss"}):
        arm.add_scale_set(group, prefix=group)
    for machine in scenario.machines:
        if machine.kind == "vmss":
            arm.add_scale_set_vm(machine.group, machine.instance, zone=machine.zone, fault_domain=machine.fault_domain)
        else:
            arm.add_vm(machine.node, zone=machine.zone, fault_domain=machine.fault_domain,
                       scale_set=machine.group if machine.kind == "flex" else None)
        imds.add_machine(machine.node, location=scenario.region, zone=machine.zone or "",
                         fault_domain=machine.fault_domain, resource_id=world.provider_id(machine).removeprefix("azure://"),
                         vm_scale_set=machine.group if machine.kind != "vm" else "")
        world.api.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": machine.node, "labels": {"kubernetes.io/hostname": machine.node, "kubernetes.io/os": "linux"}},
            "spec": {"providerID": world.provider_id(machine)}})


@contextlib.contextmanager
def running(scenario: Scenario) -> Iterator[World]:
    """Start the fakes, seed them from ``scenario``, and stop them afterwards."""
    tls = make_tls_files(tempfile.mkdtemp(prefix="cloudzones-sim-"))
    arm = FakeArm(subscription=scenario.subscription, resource_group=scenario.resource_group, location=scenario.region)
    imds = FakeImds()
    arm.start(tls=tls)
    imds.start()
    try:
        with FakeKubeApi() as api, kube.KubeClient.for_host(api.url) as client:
            world = World(scenario, arm, imds, api, client, tls)
            _populate(world)
            yield world
    finally:
        imds.stop()
        arm.stop()
