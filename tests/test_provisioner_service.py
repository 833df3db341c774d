"""The provisioner service on FakeKubeApi and FakeArm over TLS: the real client, SDK and library underneath.

The fake API server has no PV binder and no scheduler, so these tests play both parts where needed
(a ``selected-node`` annotation, a ``Released`` phase); tests/test_cp_provisioner.py has the real ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import kube, labels
from cloudzones.services import claims
from cloudzones.services.provisioner import DiskProvisioner, ProvisionerSettings
from cloudzones.testing.azure import FakeArm
from cloudzones.testing.kubeapi import FakeKubeApi
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from tests.conftest import FakeClock, FakeCredential

SUB = "44444444-0000-0000-0000-000000000000"
NAME = "cloudzones.io/azure-disk"
ZONES = ("eastus-1", "eastus-2", "eastus-3")


@pytest.fixture
def arm() -> Iterator[FakeArm]:
    """An empty FakeArm over TLS."""
    fake = FakeArm(subscription=SUB, resource_group="rg", location="eastus").start()
    yield fake
    fake.stop()


@pytest.fixture
def client(api: FakeKubeApi) -> Iterator[kube.KubeClient]:
    """The real client against the fake API server."""
    with kube.KubeClient.for_host(api.url, sleep=lambda s: None, rand=lambda: 0.5) as c:
        yield c


@pytest.fixture
def service(api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> Iterator[DiskProvisioner]:
    """A leading provisioner with synced informers over three zoned nodes and one unzoned node; no worker threads."""
    for index, zone in enumerate(ZONES):
        api.create("nodes", node(f"zoned-{index}", zone))
    api.create("nodes", node("unzoned-0", "0", fault_domain="0"))
    assert arm.tls is not None
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "eastus"}, environ={})
    clock = FakeClock()
    provider = AzureProvider(config, credential=FakeCredential(), resource_manager_url=arm.url,
                             connection_verify=str(arm.tls.ca_file), clock=clock, sleep=clock.sleep,
                             arm_settings=ArmSettings(backoff_factor=0.0, polling_interval=0.0))
    provisioner = DiskProvisioner(client, provider, settings=ProvisionerSettings(), clock=clock, rand=lambda: 0.5)
    provisioner.start_informers()
    for each in (provisioner.claims, provisioner.volumes, provisioner.classes, provisioner.nodes):
        assert each.wait_for_sync(10)
    provisioner.set_leading(True)
    yield provisioner
    provisioner.stop()


def node(name: str, zone: str, *, fault_domain: str | None = None) -> dict[str, Any]:
    """A node whose zone label is ``zone``."""
    node_labels = {labels.ZONE: zone, labels.REGION: "eastus"}
    if fault_domain is not None:
        node_labels[labels.FAULT_DOMAIN] = fault_domain
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}}


def storage_class(name: str = "zoned", *, provisioner: str = NAME, binding: str = "Immediate",
                  reclaim: str = "Delete", **parameters: str) -> dict[str, Any]:
    """A StorageClass of ours."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "parameters": {"skuName": "Premium_LRS", **parameters},
            "reclaimPolicy": reclaim, "volumeBindingMode": binding}


def claim(name: str, *, storage_class_name: str = "zoned", size: str = "10Gi", owned: bool = True,
          **annotations: str) -> dict[str, Any]:
    """A pending claim; ``owned`` sets the storage-provisioner annotation the PV controller would."""
    notes = {claims.ANN_STORAGE_PROVISIONER: NAME} if owned else {}
    notes.update(annotations)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "apps", "annotations": notes},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class_name,
                     "resources": {"requests": {"storage": size}}},
            "status": {"phase": "Pending"}}


def created(service: DiskProvisioner, api: FakeKubeApi, resource: str, body: dict[str, Any],
            namespace: str | None = None) -> dict[str, Any]:
    """Create an object and wait until the service's cache of that resource holds it."""
    stored = api.create(resource, body, namespace=namespace)
    key = f"{namespace}/{stored['metadata']['name']}" if namespace else stored["metadata"]["name"]
    assert cache(service, resource).wait_until(lambda i: i.get(key) is not None, timeout=5)
    return stored


def patched(service: DiskProvisioner, api: FakeKubeApi, resource: str, name: str, patch: dict[str, Any], *,
            namespace: str | None = None) -> None:
    """Patch an object and wait until the cache has the new version."""
    version = api.patch(resource, name, patch, namespace=namespace)["metadata"]["resourceVersion"]
    assert cache(service, resource).wait_until(lambda i: int(i.resource_version or 0) >= int(version), timeout=5)


def cache(service: DiskProvisioner, resource: str) -> Any:
    """The service's informer of ``resource``."""
    return {"persistentvolumeclaims": service.claims, "persistentvolumes": service.volumes,
            "storageclasses": service.classes, "nodes": service.nodes}[resource]


def settle(service: DiskProvisioner) -> list[str]:
    """Handle every queued key on this thread (the caches are current: `created`/`patched` waited)."""
    outcomes = []
    while (outcome := service.process_one(timeout=0.1)) is not None:
        outcomes.append(outcome)
    assert service.events.flush()
    return outcomes


def events_for(api: FakeKubeApi, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events about object ``name``."""
    return [(e["type"], e["reason"], e["message"]) for e in api.list("events")
            if e["involvedObject"]["name"] == name]


def disk_calls(arm: FakeArm) -> dict[str, int]:
    """ARM requests on disks by method."""
    return {method: count for (method, kind), count in arm.calls.items() if kind == "disks"}


class TestProvisioning:
    """Claims naming us get one disk and one pre-bound PV, whatever happens around them."""

    def test_immediate_claim(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """A disk pvc-<uid>, and a PV bound to the claim by uid, ours, protected, labelled and pinned."""
        created(service, api, "storageclasses", storage_class())
        uid = created(service, api, "persistentvolumeclaims", claim("data-db-0"), namespace="apps")["metadata"]["uid"]
        assert settle(service) == ["provisioned"]
        pv = api.get("persistentvolumes", f"pvc-{uid}")
        assert pv["spec"]["claimRef"] == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "apps",
                                          "name": "data-db-0", "uid": uid}
        assert pv["metadata"]["annotations"][claims.ANN_PROVISIONED_BY] == NAME
        assert pv["metadata"]["finalizers"] == [claims.FINALIZER]
        zone = pv["metadata"]["labels"][labels.ZONE]
        assert zone in ZONES and arm.disks[f"pvc-{uid}"]["zones"] == [zone[-1]]
        assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [zone]
        assert pv["spec"]["capacity"] == {"storage": "10Gi"} and pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
        assert disk_calls(arm) == {"GET": 1, "PUT": 1}
        assert sorted((t, r) for t, r, _ in events_for(api, "data-db-0")) == [("Normal", "Provisioning"),
                                                                               ("Normal", "ProvisioningSucceeded")]

    def test_again_is_adopted_without_arm(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """Handling the claim again finds its PV in the cache: no ARM call, no second PV."""
        created(service, api, "storageclasses", storage_class())
        created(service, api, "persistentvolumeclaims", claim("data-db-0"), namespace="apps")
        settle(service)
        before = dict(arm.calls)
        assert service.reconcile("claim/apps/data-db-0") == "adopted"
        assert dict(arm.calls) == before and len(api.list("persistentvolumes")) == 1

    def test_disk_without_pv_is_found(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """A crash after the disk was created: the next attempt GETs it (no PUT) and writes the PV."""
        created(service, api, "storageclasses", storage_class(zone="eastus-2"))
        uid = created(service, api, "persistentvolumeclaims", claim("data-db-0", owned=False), namespace="apps")["metadata"]["uid"]
        settle(service)
        service.provider.ensure_disk(f"pvc-{uid}", 10, "Premium_LRS", "eastus-2")
        arm.calls.clear()
        patched(service, api, "persistentvolumeclaims", "data-db-0", {"metadata": {"annotations": {
            claims.ANN_STORAGE_PROVISIONER: NAME}}}, namespace="apps")
        assert settle(service) == ["provisioned"]
        assert disk_calls(arm) == {"GET": 1} and len(arm.disks) == 1

    def test_pv_created_elsewhere_is_adopted(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
        """A PV the cache has not seen yet: the create answers 409 and the PV bound to the claim is taken."""
        created(service, api, "storageclasses", storage_class(zone="eastus-1"))
        uid = created(service, api, "persistentvolumeclaims", claim("data-db-0"), namespace="apps")["metadata"]["uid"]
        api.create("persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pvc-{uid}"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                     "claimRef": {"namespace": "apps", "name": "data-db-0", "uid": uid},
                     "csi": {"driver": "disk.csi.azure.com", "volumeHandle": "x"}}})
        monkeypatch.setattr(service.volumes, "get", lambda key: None)  # the PV's watch event is still on its way
        assert settle(service) == ["adopted"]
        assert len(api.list("persistentvolumes")) == 1 and len(arm.disks) == 1

    def test_not_ours(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """No annotation, another provisioner's annotation or class: nothing happens, nothing is said."""
        created(service, api, "storageclasses", storage_class())
        created(service, api, "storageclasses", storage_class("csi", provisioner="disk.csi.azure.com"))
        created(service, api, "persistentvolumeclaims", claim("a", owned=False), namespace="apps")
        created(service, api, "persistentvolumeclaims", claim("b", owned=False, **{
            claims.ANN_STORAGE_PROVISIONER: "disk.csi.azure.com"}), namespace="apps")
        created(service, api, "persistentvolumeclaims", claim("c", storage_class_name="csi"), namespace="apps")
        assert settle(service) == ["skipped: StorageClass 'csi' belongs to 'disk.csi.azure.com'"]
        assert not api.list("persistentvolumes") and not arm.disks and not api.list("events")

    def test_balanced_statefulset(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """Six replicas of a StatefulSet over three zones with nodes: two disks per zone."""
        created(service, api, "storageclasses", storage_class())
        for ordinal in range(6):
            created(service, api, "persistentvolumeclaims", claim(f"data-db-{ordinal}"), namespace="apps")
        assert settle(service) == ["provisioned"] * 6
        zones = sorted(pv["metadata"]["labels"][labels.ZONE] for pv in api.list("persistentvolumes"))
        assert zones == sorted(ZONES * 2)

    def test_capacity_and_sku(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """1500Mi becomes a 2 GiB disk; storageaccounttype names the SKU; a ZRS SKU gets no zone."""
        created(service, api, "storageclasses", {**storage_class("zrs"), "parameters": {"storageaccounttype": "StandardSSD_ZRS"}})
        uid = created(service, api, "persistentvolumeclaims", claim("logs", storage_class_name="zrs", size="1500Mi"),
                         namespace="apps")["metadata"]["uid"]
        assert settle(service) == ["provisioned"]
        disk = arm.disks[f"pvc-{uid}"]
        assert disk["sku"]["name"] == "StandardSSD_ZRS" and "zones" not in disk
        assert disk["properties"]["diskSizeGB"] == 2
        assert api.get("persistentvolumes", f"pvc-{uid}")["spec"]["capacity"] == {"storage": "2Gi"}


class TestWaitForFirstConsumer:
    """WaitForFirstConsumer claims follow the scheduler's node, and hand it back when it cannot work."""

    def test_waits_then_follows_the_node(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """Nothing before selected-node; then the disk goes to that node's zone."""
        created(service, api, "storageclasses", storage_class("late", binding="WaitForFirstConsumer"))
        uid = created(service, api, "persistentvolumeclaims", claim("data", storage_class_name="late"),
                         namespace="apps")["metadata"]["uid"]
        assert settle(service) == ["skipped: waiting for the first consumer"]
        patched(service, api, "persistentvolumeclaims", "data", {"metadata": {"annotations": {
            claims.ANN_SELECTED_NODE: "zoned-2"}}}, namespace="apps")
        assert settle(service) == ["provisioned"]
        assert arm.disks[f"pvc-{uid}"]["zones"] == ["3"]

    def test_unzoned_node_is_handed_back(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """An unzoned node: one ProvisioningFailed naming the rule, selected-node removed, no disk."""
        created(service, api, "storageclasses", storage_class("late", binding="WaitForFirstConsumer"))
        created(service, api, "persistentvolumeclaims", claim("data", storage_class_name="late", **{
            claims.ANN_SELECTED_NODE: "unzoned-0"}), namespace="apps")
        assert settle(service)[0] == "retry"  # then, maybe, the echo of our patch: waiting for the scheduler
        assert claims.ANN_SELECTED_NODE not in api.get("persistentvolumeclaims", "data",
                                                       namespace="apps")["metadata"]["annotations"]
        (kind, _, message), = [e for e in events_for(api, "data") if e[1] == "ProvisioningFailed"]
        assert kind == "Warning" and "rule 'selected-node'" in message and "'unzoned-0'" in message
        assert not arm.disks and not api.list("persistentvolumes")


class TestRefusals:
    """A class that breaks a rule: the claim stays pending, told why once, and ARM is never called."""

    @pytest.mark.parametrize(("parameters", "rule"), [
        ({"skuName": "Premium_LRS", "color": "blue"}, "unknown-parameter"),
        ({"skuName": "Gold_LRS"}, "sku"),
        ({"skuName": "Premium_ZRS", "zone": "eastus-1"}, "zone-with-zone-redundant-sku"),
        ({"skuName": "Premium_LRS", "zone": "westus-1"}, "zone-format"),
    ])
    def test_bad_class(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm, parameters: dict[str, str],
                       rule: str) -> None:
        """One ProvisioningFailed Event naming the rule, however often the claim is tried."""
        created(service, api, "storageclasses", {**storage_class("bad"), "parameters": parameters})
        created(service, api, "persistentvolumeclaims", claim("data", storage_class_name="bad"), namespace="apps")
        assert settle(service) == ["retry"]
        assert service.reconcile("claim/apps/data") == "retry"
        assert service.events.flush()
        failures = [e for e in events_for(api, "data") if e[1] == "ProvisioningFailed"]
        assert len(failures) == 1 and f"rule {rule!r}" in failures[0][2], failures
        assert not arm.calls and not api.list("persistentvolumes")

    def test_missing_class_then_created(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """A class that does not exist yet: refused; its creation brings the claim back at once."""
        created(service, api, "persistentvolumeclaims", claim("data", storage_class_name="later"), namespace="apps")
        assert settle(service) == ["retry"]
        created(service, api, "storageclasses", storage_class("later"))
        assert settle(service) == ["provisioned"]

    def test_selector_refused(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """A claim with a selector asks for an existing volume: refused, as external-provisioner does."""
        created(service, api, "storageclasses", storage_class())
        body = claim("data")
        body["spec"]["selector"] = {"matchLabels": {"tier": "gold"}}
        created(service, api, "persistentvolumeclaims", body, namespace="apps")
        assert settle(service) == ["retry"]
        assert any("selector" in message for _, _, message in events_for(api, "data"))

    def test_follower_writes_nothing(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """Without the Lease nothing is created, in ARM or in the cluster."""
        service.set_leading(False)
        created(service, api, "storageclasses", storage_class())
        created(service, api, "persistentvolumeclaims", claim("data"), namespace="apps")
        assert settle(service) == ["skipped: not the leader"]
        assert not arm.calls and not api.list("persistentvolumes") and not api.list("events")


class TestDeletion:
    """Released PVs of ours lose their disk (Delete) or keep it (Retain)."""

    def provisioned(self, service: DiskProvisioner, api: FakeKubeApi, reclaim: str = "Delete") -> str:
        created(service, api, "storageclasses", storage_class(reclaim=reclaim))
        uid = created(service, api, "persistentvolumeclaims", claim("data"), namespace="apps")["metadata"]["uid"]
        assert settle(service) == ["provisioned"]
        return f"pvc-{uid}"

    def release(self, service: DiskProvisioner, api: FakeKubeApi, name: str) -> None:
        """What the binder does once the claim is deleted."""
        api.delete("persistentvolumeclaims", "data", namespace="apps")
        patched(service, api, "persistentvolumes", name, {"status": {"phase": "Released"}})

    def test_delete_policy(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """Disk deleted, finalizer removed, PV gone."""
        name = self.provisioned(service, api)
        self.release(service, api, name)
        assert "deleted" in settle(service)
        assert name not in arm.disks and api.find("persistentvolumes", name) is None

    def test_attached_disk_waits(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """ARM says attached: refused with one Event, the PV kept; once detached, the retry deletes it."""
        name = self.provisioned(service, api)
        arm.disks[name]["managedBy"] = "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/vm/a"
        self.release(service, api, name)
        assert settle(service) == ["retry"]
        assert service.reconcile(f"volume/{name}") == "retry"
        assert service.events.flush()
        (event,) = [e for e in events_for(api, name) if e[1] == "VolumeFailedDelete"]
        assert "still attached" in event[2]
        assert name in arm.disks and api.find("persistentvolumes", name) is not None
        del arm.disks[name]["managedBy"]
        assert service.reconcile(f"volume/{name}") == "deleted"
        assert name not in arm.disks

    def test_retain_policy(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """Retain: no finalizer is added and the disk is never touched."""
        name = self.provisioned(service, api, reclaim="Retain")
        assert "finalizers" not in api.get("persistentvolumes", name)["metadata"]
        self.release(service, api, name)
        arm.calls.clear()
        assert settle(service) == []
        assert name in arm.disks and not arm.calls and api.find("persistentvolumes", name) is not None

    def test_deleted_object_lets_go(self, service: DiskProvisioner, api: FakeKubeApi, arm: FakeArm) -> None:
        """`kubectl delete pv` on an unbound PV of ours: the disk goes first, then the object."""
        name = self.provisioned(service, api)
        api.delete("persistentvolumes", name)
        assert api.get("persistentvolumes", name)["metadata"]["deletionTimestamp"]
        assert settle(service) == ["deleted"]
        assert name not in arm.disks and api.find("persistentvolumes", name) is None


class TestReadiness:
    """Ready only once every cache is listed."""

    def test_not_synced(self, client: kube.KubeClient, arm: FakeArm) -> None:
        """Before the informers list, readiness names them."""
        provisioner = DiskProvisioner(client, object())
        assert "persistentvolumeclaims" in provisioner.readiness()

    def test_synced(self, service: DiskProvisioner) -> None:
        """After the first lists: ready."""
        assert service.readiness() == ""
