"""Benchmark: `cloudzones provisioner`'s service on the real kube-apiserver vs a bare loop of the same writes.

Scenario: ``--claims`` (500) pending 1 GiB claims on an Immediate class of ours, over three zones
of nodes, already annotated for us as kube-controller-manager would. The service is the real
`DiskProvisioner` (four informers, work queue, ``--workers`` threads, Events) with the real
`KubeClient` against etcd + kube-apiserver (`cloudzones.testing.ControlPlane`) and a real
`AzureProvider` against `FakeArm` over loopback HTTPS. It is timed from ``start()`` (informers
listing included) until its last PV exists. The floor does the least the job needs, with the same
number of threads, the same SDK client and the same API client: one disk PUT (the SDK's create
and its poller) and one PV create per claim, nothing read, nothing said. Service and floor
alternate for ``--rounds`` rounds, each on claims of its own; medians are compared.

A second floor sends the same requests as the service (the disk GET of create-or-get, and the
Provisioning / ProvisioningSucceeded Events, inline), which separates the cost of what the service
must send from the cost of how it is organised (informers, queue, retries).

Goals: service / bare floor <= 1.5; ARM calls per claim: one PUT and at most one GET.

Run:  PYTHONPATH=. python bench/provisioner.py [--claims 500] [--workers 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import time
from typing import Any

from cloudzones import kube, labels
from cloudzones.kube import events
from cloudzones.services import claims
from cloudzones.services.provisioner import DiskProvisioner, ProvisionerSettings
from cloudzones.testing.azure import FakeArm
from cloudzones.testing.controlplane import ControlPlane, find_binaries
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from providers.azure.disks import disk_body

SUB, GROUP, REGION = "55555555-0000-4000-8000-000000000000", "rg", "eastus"
NAME = "cloudzones.io/azure-disk"
ZONES = ("eastus-1", "eastus-2", "eastus-3")


class _Credential:
    """A token that never expires and costs nothing (the bench measures ARM calls, not AAD)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken("bench", int(time.time()) + 3600)


def provider(arm: FakeArm) -> AzureProvider:
    """A real AzureProvider against FakeArm over TLS."""
    assert arm.tls is not None
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": GROUP, "location": REGION}, environ={})
    return AzureProvider(config, credential=_Credential(), resource_manager_url=arm.url,
                         connection_verify=str(arm.tls.ca_file),
                         arm_settings=ArmSettings(backoff_factor=0.0, polling_interval=0.0))


def make_claims(plane: ControlPlane, namespace: str, count: int, *, ours: bool) -> list[dict[str, Any]]:
    """``count`` pending claims on class ``bench`` (annotated for us when ``ours``); returns them as stored."""
    plane.ensure_namespace(namespace)
    notes = {claims.ANN_STORAGE_PROVISIONER: NAME} if ours else {}
    return [plane.client.create(kube.PERSISTENT_VOLUME_CLAIMS, {
        "metadata": {"name": f"data-{i}", "namespace": namespace, "annotations": notes},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "bench",
                 "resources": {"requests": {"storage": "1Gi"}}}}) for i in range(count)]


def floor(plane: ControlPlane, cloud: AzureProvider, pending: list[dict[str, Any]], workers: int, *,
          same_requests: bool = False) -> float:
    """Seconds for the bare writes: disk PUT + PV create per claim, ``workers`` threads.

    ``same_requests`` adds what the service must also send: the disk GET (create-or-get: a second
    attempt writes nothing) and the two Events, sent inline.
    """
    compute = cloud.compute()

    def one(index: int, pvc: dict[str, Any]) -> None:
        name = f"floor-{pvc['metadata']['uid']}"
        zone = ZONES[index % 3]
        if same_requests:
            compute.get_disk(GROUP, name)
            events.emit(plane.client, pvc, reason="Provisioning", message="floor", kind="PersistentVolumeClaim",
                        event_type="Normal")
        compute.create_disk(GROUP, name, disk_body(location=REGION, size_gib=1, sku="Premium_LRS",
                                                   zone=zone[-1], tags={}), timeout=60)
        plane.client.create(kube.PERSISTENT_VOLUMES, {
            "metadata": {"name": name, "labels": {labels.ZONE: zone}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "bench",
                     "claimRef": {"namespace": pvc["metadata"]["namespace"], "name": pvc["metadata"]["name"],
                                  "uid": pvc["metadata"]["uid"]},
                     "azureDisk": {"diskName": name, "diskURI": f"/subscriptions/{SUB}/resourceGroups/{GROUP}/"
                                   f"providers/Microsoft.Compute/disks/{name}", "kind": "Managed"}}})
        if same_requests:
            events.emit(plane.client, pvc, reason="ProvisioningSucceeded", message="floor",
                        kind="PersistentVolumeClaim", event_type="Normal")

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(len(pending)), pending))
    return time.perf_counter() - started


def service(plane: ControlPlane, cloud: AzureProvider, count: int, workers: int) -> float:
    """Seconds from start() until the service has provisioned ``count`` claims."""
    provisioner = DiskProvisioner(plane.client, cloud, settings=ProvisionerSettings(workers=workers))
    started = time.perf_counter()
    provisioner.start()
    while provisioner.metrics.provisioned._value.get() < count:
        time.sleep(0.005)  # a bench polls its figure; tests never sleep
    elapsed = time.perf_counter() - started
    provisioner.stop()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=500)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if find_binaries() is None:
        raise SystemExit("no control-plane binaries: run scripts/control-plane build")
    arm = FakeArm(subscription=SUB, resource_group=GROUP, location=REGION).start()
    with ControlPlane() as plane:
        plane.add_nodes({"metadata": {"name": f"node-{z}-{i}", "labels": {labels.ZONE: z, labels.REGION: REGION}}}
                        for z in ZONES for i in range(3))
        plane.client.create(kube.STORAGE_CLASSES, {"metadata": {"name": "bench"}, "provisioner": NAME,
                                                   "parameters": {"skuName": "Premium_LRS"},
                                                   "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        cloud = provider(arm)
        floors, sames, services, puts, gets = [], [], [], [], []
        for round_ in range(args.rounds):
            # The floor's claims are not annotated for us: the service leaves them alone.
            floors.append(floor(plane, cloud, make_claims(plane, f"floor-{round_}", args.claims, ours=False),
                                args.workers))
            sames.append(floor(plane, cloud, make_claims(plane, f"same-{round_}", args.claims, ours=False),
                               args.workers, same_requests=True))
            make_claims(plane, f"service-{round_}", args.claims, ours=True)
            before = dict(arm.calls)
            services.append(service(plane, cloud, args.claims, args.workers))
            puts.append(arm.calls[("PUT", "disks")] - before.get(("PUT", "disks"), 0))
            gets.append(arm.calls[("GET", "disks")] - before.get(("GET", "disks"), 0))
            print(f"round {round_ + 1}: floor {floors[-1]:.2f} s, same-requests floor {sames[-1]:.2f} s, "
                  f"service {services[-1]:.2f} s, "
                  f"service ARM disk PUTs {puts[-1]}, GETs {gets[-1]}")
    arm.stop()
    bare, same, took = statistics.median(floors), statistics.median(sames), statistics.median(services)
    print(f"{args.claims} claims, {args.workers} workers: service {took:.2f} s ({args.claims / took:.0f} claims/s); "
          f"bare floor (PUT + PV) {bare:.2f} s ({args.claims / bare:.0f} claims/s), ratio {took / bare:.2f} "
          f"(goal <= 1.5); same-requests floor (+ GET + 2 Events) {same:.2f} s, ratio {took / same:.2f}; "
          f"ARM per claim: {max(puts) / args.claims:.2f} PUT, {max(gets) / args.claims:.2f} GET (goal 1 and <= 1)")


if __name__ == "__main__":
    main()
