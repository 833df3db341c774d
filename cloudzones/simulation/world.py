"""The emulated cloud and cluster of a simulation: FakeArm (HTTPS), FakeImds, and FakeKubeApi or a real control plane.

By default the cluster is FakeKubeApi, in-process. With ``control_plane=True`` it is a real etcd +
kube-apiserver on loopback (`cloudzones.testing.controlplane.ControlPlane`), reached as an admin:
the same steps then meet the real API server's validation and admission.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
import secrets
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from cloudzones import kube
from cloudzones.simulation.scenario import Machine, Scenario
from cloudzones.testing.azure import FakeArm, FakeImds, StaticCredential
from cloudzones.testing.controlplane import ControlPlane
from cloudzones.testing.kubeapi import FakeKubeApi
from cloudzones.testing.tls import TlsFiles, make_tls_files
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings

SIMULATED_SECRET = "sim-secret-" + secrets.token_hex(8)
"""The client secret the simulated cloud config carries; it must never appear in any log line."""


class ClusterApi(Protocol):
    """What the steps ask of the cluster directly (the components themselves go through ``World.client``)."""

    def create(self, resource: str, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Create an object (``resource`` is the plural: ``nodes``, ``pods``); returns it as stored."""

    def get(self, resource: str, name: str, *, namespace: str = "") -> dict[str, Any]:
        """One object."""

    def list(self, resource: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """The objects (of ``namespace``, or all)."""

    def count(self, verb: str | None = None, resource: str | None = None) -> int:
        """How many requests of ``verb`` on ``resource`` the components made."""


class RealApi:
    """`ClusterApi` over a running `ControlPlane`, as its admin."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._baseline: collections.Counter[tuple[str, str]] = collections.Counter()

    def create(self, resource: str, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        if resource == "nodes":
            # A node without a kubelet must be made Ready and lose the not-ready taint, or placement skips it.
            return self.plane.add_nodes([obj])[0]
        return self.plane.client.create(kube.RESOURCES[resource], obj, namespace=namespace)

    def get(self, resource: str, name: str, *, namespace: str = "") -> dict[str, Any]:
        return self.plane.client.get(kube.RESOURCES[resource], name, namespace=namespace or None)

    def list(self, resource: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        return list(self.plane.client.list(kube.RESOURCES[resource], namespace=namespace)["items"])

    def count(self, verb: str | None = None, resource: str | None = None) -> int:
        """From the API server's ``apiserver_request_total``, since `reset_count` (the seeding is not counted)."""
        return sum(value - self._baseline.get(key, 0) for key, value in self._requests().items()
                   if (verb is None or key[0] == verb.upper()) and (resource is None or key[1] == resource))

    def reset_count(self) -> None:
        """Count from zero again."""
        self._baseline = self._requests()

    def _requests(self) -> collections.Counter[tuple[str, str]]:
        """Requests served so far by (verb, resource), every response code and subresource together."""
        request = urllib.request.Request(f"{self.plane.url}/metrics", headers={"Accept": "text/plain"})  # noqa: S310
        with urllib.request.urlopen(request, context=self.plane.ssl_context, timeout=30) as answer:  # noqa: S310
            text = answer.read().decode()
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for labelled, value in re.findall(r"^apiserver_request_total\{([^}]*)\} (\S+)$", text, re.M):
            found = dict(re.findall(r'(\w+)="([^"]*)"', labelled))
            counts[(found.get("verb", ""), found.get("resource", ""))] += int(float(value))
        return counts


@dataclasses.dataclass
class World:
    """Everything a simulation step talks to."""

    scenario: Scenario
    arm: FakeArm
    imds: FakeImds
    api: ClusterApi
    client: kube.KubeClient
    tls: TlsFiles
    server: str = "FakeKubeApi"
    """Which API server the cluster is: ``FakeKubeApi`` or ``kube-apiserver <version>``."""

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
def running(scenario: Scenario, *, control_plane: bool = False) -> Iterator[World]:
    """Start the fakes (and the control plane when asked), seed them from ``scenario``, and stop them afterwards.

    ``control_plane`` needs the binaries (`cloudzones.testing.controlplane.find_binaries`); without
    them `ControlPlaneError` says how to build them.
    """
    tls = make_tls_files(tempfile.mkdtemp(prefix="cloudzones-sim-"))
    arm = FakeArm(subscription=scenario.subscription, resource_group=scenario.resource_group, location=scenario.region)
    imds = FakeImds()
    arm.start(tls=tls)
    imds.start()
    try:
        if control_plane:
            with ControlPlane() as plane:
                # No controller manager runs, so nothing gives "default" the service account pods need.
                plane.ensure_namespace("default")
                real = RealApi(plane)
                version = plane.request("GET", "/version").get("gitVersion", "?")
                world = World(scenario, arm, imds, real, plane.client, tls, server=f"kube-apiserver {version}")
                _populate(world)
                real.reset_count()
                yield world
        else:
            with FakeKubeApi() as api, kube.KubeClient.for_host(api.url) as client:
                world = World(scenario, arm, imds, api, client, tls)
                _populate(world)
                yield world
    finally:
        imds.stop()
        arm.stop()
        shutil.rmtree(tls.ca_file.parent, ignore_errors=True)  # a CA key: not left behind in /tmp
