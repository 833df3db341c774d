"""Tests for storageclass.Provisioner against FakeArm through the real Azure SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import responses

from cloudzones import errors, labels
from cloudzones.testing.azure import FakeArm
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from storageclass import Provisioner
from storageclass.provisioner import size_in_gib
from tests.conftest import FakeClock, FakeCredential

SUB = "22222222-0000-0000-0000-000000000000"
ZONES = ["eastus-1", "eastus-2", "eastus-3"]


@pytest.fixture
def arm() -> Iterator[FakeArm]:
    """A FakeArm served through responses."""
    fake = FakeArm(subscription=SUB, resource_group="rg", location="eastus")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        fake.register(mock)
        yield fake


def make_provisioner(**options: Any) -> Provisioner:
    """A provisioner over a real AzureProvider (fake credential, no waits)."""
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "eastus"}, environ={})
    clock = FakeClock()
    provider = AzureProvider(config, credential=FakeCredential(), clock=clock, sleep=clock.sleep,
                             arm_settings=ArmSettings(backoff_factor=0.0, polling_interval=0.0))
    return Provisioner(provider, **options)


def claim(name: str = "data-db-0", uid: str = "u1", size: str = "10Gi") -> dict[str, Any]:
    """A PVC manifest."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "apps", "uid": uid},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}


def storage_class(**parameters: str) -> dict[str, Any]:
    """A managed-disk StorageClass."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zoned"},
            "provisioner": "kubernetes.io/azure-disk", "parameters": {"skuName": "Premium_LRS", **parameters},
            "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}


class TestProvision:
    """provision creates one disk per claim and a PV pinned to its zone."""

    def test_zoned_pv(self, arm: FakeArm) -> None:
        """The PV names the disk, carries zone labels and one zone affinity term."""
        pv = make_provisioner().provision(claim(), storage_class(), active_zones=ZONES)
        zone = pv["metadata"]["labels"][labels.ZONE]
        assert zone in ZONES and arm.disks["pvc-u1"]["zones"] == [zone[-1]]
        assert pv["spec"]["azureDisk"]["diskURI"].endswith("/disks/pvc-u1") and pv["spec"]["capacity"] == {"storage": "10Gi"}
        terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": labels.ZONE, "operator": "In", "values": [zone]},
                                               {"key": labels.REGION, "operator": "In", "values": ["eastus"]}]}]
        assert pv["spec"]["claimRef"]["uid"] == "u1"

    def test_explained_choice_is_the_disk_zone(self, arm: FakeArm) -> None:
        """provision_explained reports the rule and the zone the disk was actually created in."""
        pv, choice = make_provisioner().provision_explained(claim(), storage_class(zones="eastus-2"), active_zones=ZONES)
        assert str(choice.rule) == "zones" and choice.zones == ("eastus-2",)
        assert pv["metadata"]["labels"][labels.ZONE] == "eastus-2" and arm.disks["pvc-u1"]["zones"] == ["2"]

    def test_idempotent(self, arm: FakeArm) -> None:
        """A second call for the same claim finds the disk and writes nothing."""
        provisioner = make_provisioner()
        first = provisioner.provision(claim(), storage_class(), active_zones=ZONES)
        puts = arm.calls[("PUT", "disks")]
        second = provisioner.provision(claim(), storage_class(), active_zones=ZONES)
        assert first == second and arm.calls[("PUT", "disks")] == puts == 1

    def test_crash_between_disk_and_pv(self, arm: FakeArm) -> None:
        """A provisioner that died after creating the disk is replaced by one that finds it: no second disk."""
        make_provisioner().provision(claim(), storage_class(), active_zones=ZONES)
        pv = make_provisioner().provision(claim(), storage_class(), active_zones=ZONES)
        assert list(arm.disks) == ["pvc-u1"] and arm.calls[("PUT", "disks")] == 1
        assert pv["metadata"]["name"] == "pvc-u1"

    def test_wait_for_first_consumer(self, arm: FakeArm) -> None:
        """Under WaitForFirstConsumer the selected node's zone is used."""
        sc = storage_class() | {"volumeBindingMode": "WaitForFirstConsumer"}
        node = {"metadata": {"name": "n1", "labels": {labels.ZONE: "eastus-3", labels.REGION: "eastus"}}}
        pv = make_provisioner().provision(claim(), sc, active_zones=ZONES, selected_node=node)
        assert pv["metadata"]["labels"][labels.ZONE] == "eastus-3"

    def test_zrs_usable_everywhere(self, arm: FakeArm) -> None:
        """A ZRS disk has no zone; its PV only requires the region."""
        pv = make_provisioner().provision(claim(), storage_class(skuName="Premium_ZRS"), active_zones=ZONES)
        assert "zones" not in arm.disks["pvc-u1"] and labels.ZONE not in pv["metadata"]["labels"]
        assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
            {"matchExpressions": [{"key": labels.REGION, "operator": "In", "values": ["eastus"]}]}]

    def test_csi_form(self, arm: FakeArm) -> None:
        """The CSI form uses disk.csi.azure.com, the disk URI as handle, and the driver's zone key."""
        pv = make_provisioner(csi=True).provision(claim(), storage_class(), active_zones=ZONES)
        assert pv["spec"]["csi"]["driver"] == "disk.csi.azure.com"
        assert pv["spec"]["csi"]["volumeHandle"] == arm.disks["pvc-u1"]["id"]
        keys = [r["key"] for r in pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]]
        assert labels.CSI_DISK_ZONE in keys

    def test_no_zoned_nodes(self, arm: FakeArm) -> None:
        """Only fault domains → NoZonedNodes and no disk."""
        with pytest.raises(errors.NoZonedNodes):
            make_provisioner().provision(claim(), storage_class(), active_zones=["0", "1"])
        assert arm.disks == {}

    def test_invalid_class_makes_no_disk(self, arm: FakeArm) -> None:
        """A StorageClass breaking a rule fails before any ARM call."""
        with pytest.raises(errors.InvalidStorageClass):
            make_provisioner().provision(claim(), storage_class(zone="eastus-1", zones="eastus-2"), active_zones=ZONES)
        assert sum(arm.calls.values()) == 0

    def test_claim_without_uid(self, arm: FakeArm) -> None:
        """A claim without a UID cannot be named stably: refused."""
        bad = claim()
        del bad["metadata"]["uid"]
        with pytest.raises(errors.CloudZonesError, match="uid"):
            make_provisioner().provision(bad, storage_class(), active_zones=ZONES)


class TestDelete:
    """delete removes the disk, idempotently, and never for Retain volumes."""

    def test_delete_then_again(self, arm: FakeArm) -> None:
        """Deleting twice is fine."""
        provisioner = make_provisioner()
        pv = provisioner.provision(claim(), storage_class(), active_zones=ZONES)
        provisioner.delete(pv)
        assert arm.disks == {}
        provisioner.delete(pv)

    def test_retain_refused(self, arm: FakeArm) -> None:
        """A Retain PV keeps its disk."""
        provisioner = make_provisioner()
        pv = provisioner.provision(claim(), storage_class() | {"reclaimPolicy": "Retain"}, active_zones=ZONES)
        with pytest.raises(errors.CloudZonesError, match="Retain"):
            provisioner.delete(pv)
        assert "pvc-u1" in arm.disks

    def test_other_group_refused(self, arm: FakeArm) -> None:
        """A disk outside the configured resource group is never deleted."""
        pv = {"spec": {"csi": {"driver": "disk.csi.azure.com",
                               "volumeHandle": f"/subscriptions/{SUB}/resourceGroups/other/providers/Microsoft.Compute/disks/d"}}}
        with pytest.raises(errors.CloudZonesError, match="outside resource group"):
            make_provisioner().delete(pv)


class TestSizeInGib:
    """Kubernetes quantities round up to whole GiB."""

    @pytest.mark.parametrize(("quantity", "gib"), [("10Gi", 10), ("1Ti", 1024), ("100G", 94), ("512Mi", 1),
                                                   ("1500Mi", 2), ("5368709120", 5), ("1e9", 1), ("1.5Gi", 2)])
    def test_valid(self, quantity: str, gib: int) -> None:
        """Binary and decimal suffixes."""
        assert size_in_gib(quantity) == gib

    @pytest.mark.parametrize("quantity", ["", "ten", "-1Gi", "0", "1Xi", "9" * 5000 + "Gi", "1e400"])
    def test_invalid(self, quantity: str) -> None:
        """Garbage is a clear error."""
        with pytest.raises(errors.CloudZonesError):
            size_in_gib(quantity)
