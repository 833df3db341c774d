"""Tests for managed disks through azure-mgmt-compute: idempotent create, delete, and PV labels."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import responses

from cloudzones import errors, labels
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from providers.azure.disks import disk_name_for_claim
from tests.conftest import FakeClock, FakeCredential, fixture_body

SUB = "00000000-0000-0000-0000-0000000000bb"
DISKS = f"https://management.azure.com/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/disks"
URI = f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/disks"
NOT_FOUND = {"error": {"code": "ResourceNotFound", "message": "The Resource was not found."}}


def make_provider(clock: FakeClock) -> AzureProvider:
    """A provider for subscription SUB, group rg, region westus2, polling without waits."""
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "westus2"}, environ={})
    return AzureProvider(config, credential=FakeCredential(), clock=clock, sleep=clock.sleep,
                         arm_settings=ArmSettings(backoff_factor=0.0, polling_interval=0.0))


def zonal_disk(name: str = "pvc-1") -> dict[str, Any]:
    """The derived zonal disk (zone 1, Premium_LRS, 200 GiB), renamed."""
    body = copy.deepcopy(fixture_body("arm/compute/derived_Disks_Get_WithZone_Succeeded.json"))
    body["name"] = name
    return body


def creating(name: str = "pvc-1") -> dict[str, Any]:
    """The PUT's answer while the disk is still being created."""
    body = copy.deepcopy(fixture_body("arm/compute/derived_Disks_CreateOrUpdate_WithZone.json", "202"))
    body["name"] = name
    return body


class TestEnsureDisk:
    """ensure_disk creates once and finds the disk afterwards."""

    @responses.activate
    def test_creates_zonal_disk_then_is_idempotent(self, clock: FakeClock) -> None:
        """First call: GET 404, PUT with zones ['1'], poll to Succeeded. Second call: GET only, no PUT."""
        responses.get(f"{DISKS}/pvc-1", status=404, json=NOT_FOUND)
        responses.put(f"{DISKS}/pvc-1", status=200, json=creating())
        responses.get(f"{DISKS}/pvc-1", json=zonal_disk())
        provider = make_provider(clock)
        disk, created = provider.ensure_disk("pvc-1", 200, "Premium_LRS", "westus2-1", {"kubernetes.io-created-for-pvc-name": "data"})
        assert created and disk.zones == ("1",) and disk.provisioning_state == "Succeeded"
        put = json.loads(next(c.request.body for c in responses.calls if c.request.method == "PUT"))
        assert put["zones"] == ["1"] and put["sku"] == {"name": "Premium_LRS"}
        assert put["properties"] == {"creationData": {"createOption": "Empty"}, "diskSizeGB": 200}
        assert put["tags"] == {"kubernetes.io-created-for-pvc-name": "data"} and put["location"] == "westus2"
        methods = [c.request.method for c in responses.calls]
        disk2, created2 = provider.ensure_disk("pvc-1", 200, "Premium_LRS", "westus2-1")
        assert not created2 and disk2 == disk
        assert [c.request.method for c in responses.calls][len(methods):] == ["GET"]

    @responses.activate
    def test_zrs_has_no_zone(self, clock: FakeClock) -> None:
        """A ZRS disk is created without zones (spec example)."""
        responses.get(f"{DISKS}/pvc-z", status=404, json=NOT_FOUND)
        body = fixture_body("arm/compute/Disks_CreateOrUpdate_PremiumZRS_2025-01-02.json", "200")
        responses.put(f"{DISKS}/pvc-z", json=body | {"properties": body["properties"] | {"provisioningState": "Succeeded"}})
        disk, created = make_provider(clock).ensure_disk("pvc-z", 200, "Premium_ZRS", None)
        put = json.loads(responses.calls[1].request.body)
        assert created and "zones" not in put and disk.sku == "Premium_ZRS"

    def test_zrs_in_zone_refused_before_arm(self, clock: FakeClock) -> None:
        """Asking for a ZRS disk in a zone fails without any request."""
        provider = make_provider(clock)
        with pytest.raises(errors.CloudZonesError, match="zone-redundant"):
            provider.ensure_disk("pvc-z", 10, "Premium_ZRS", "westus2-1")
        assert provider.arm_calls.total == 0

    @pytest.mark.parametrize("zone", ["0", "eastus-1", "westus2-a"])
    def test_not_a_zone_of_region(self, clock: FakeClock, zone: str) -> None:
        """Fault domains and other regions' zones are refused with the value."""
        with pytest.raises(errors.InvalidZone) as info:
            make_provider(clock).ensure_disk("pvc-1", 10, "Premium_LRS", zone)
        assert repr(zone) in str(info.value)

    @responses.activate
    def test_arm_refusal_explained(self, clock: FakeClock) -> None:
        """ARM's OperationNotAllowed becomes a CloudApiError with a plain explanation and ARM's text."""
        responses.get(f"{DISKS}/pvc-1", status=404, json=NOT_FOUND)
        responses.put(f"{DISKS}/pvc-1", status=400, json=fixture_body("arm/compute/derived_error_Disk_ZRS_in_zone.json"))
        with pytest.raises(errors.CloudApiError, match="does not allow.*cannot be created in an availability zone") as info:
            make_provider(clock).ensure_disk("pvc-1", 10, "Premium_LRS", "westus2-1")
        assert info.value.status == 400

    @responses.activate
    def test_existing_disk_in_other_zone(self, clock: FakeClock) -> None:
        """A same-named disk in another zone is never silently reused."""
        responses.get(f"{DISKS}/pvc-1", json=zonal_disk())
        with pytest.raises(errors.CloudZonesError, match="already exists in zone westus2-1 but zone westus2-2"):
            make_provider(clock).ensure_disk("pvc-1", 10, "Premium_LRS", "westus2-2")

    @responses.activate
    def test_throttled_create(self, clock: FakeClock) -> None:
        """A 429 on PUT closes the write gate; reads still go through."""
        responses.get(f"{DISKS}/pvc-1", status=404, json=NOT_FOUND)
        responses.put(f"{DISKS}/pvc-1", status=429, headers={"Retry-After": "7"}, json={"error": {"code": "TooManyRequests", "message": "x"}})
        provider = make_provider(clock)
        with pytest.raises(errors.CloudApiError) as info:
            provider.ensure_disk("pvc-1", 10, "Premium_LRS", "westus2-1")
        assert info.value.status == 429 and info.value.retry_after == 7
        with pytest.raises(errors.CloudApiError, match="writes are throttled"):
            provider.ensure_disk("pvc-1", 10, "Premium_LRS", "westus2-1")

    def test_disk_name_from_claim_uid(self) -> None:
        """pvc-<uid>, and a claim without uid is refused."""
        assert disk_name_for_claim({"metadata": {"uid": "abc"}}) == "pvc-abc"
        with pytest.raises(errors.CloudZonesError, match="uid"):
            disk_name_for_claim({"metadata": {}})


class TestDeleteDisk:
    """delete_disk is idempotent and refuses attached disks."""

    @responses.activate
    def test_attached_refused(self, clock: FakeClock) -> None:
        """A disk with managedBy set is not deleted."""
        responses.get(f"{DISKS}/myManagedDisk", json=fixture_body("arm/compute/Disks_Get_2025-01-02.json"))
        with pytest.raises(errors.CloudZonesError, match="still attached to /subscriptions/.*TestVM"):
            make_provider(clock).delete_disk("myManagedDisk")
        assert [c.request.method for c in responses.calls] == ["GET"]

    @responses.activate
    def test_gone_is_fine(self, clock: FakeClock) -> None:
        """A missing disk returns False without a DELETE."""
        responses.get(f"{DISKS}/pvc-1", status=404, json=NOT_FOUND)
        assert make_provider(clock).delete_disk("pvc-1") is False

    @responses.activate
    def test_deletes(self, clock: FakeClock) -> None:
        """An unattached disk is deleted."""
        responses.get(f"{DISKS}/pvc-1", json=zonal_disk())
        responses.delete(f"{DISKS}/pvc-1", status=200)
        assert make_provider(clock).delete_disk("pvc-1") is True
        assert [c.request.method for c in responses.calls] == ["GET", "DELETE"]


def in_tree_pv(uri: str, name: str = "pvc-1") -> dict[str, Any]:
    """An in-tree azureDisk PV."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"azureDisk": {"diskName": name, "diskURI": uri, "kind": "Managed"}}}


def csi_pv(uri: str) -> dict[str, Any]:
    """A disk.csi.azure.com PV."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
            "spec": {"csi": {"driver": "disk.csi.azure.com", "volumeHandle": uri}}}


class TestLabelsForVolume:
    """labels_for_volume reads the disk and returns region (+ zone) labels."""

    @responses.activate
    @pytest.mark.parametrize("make_pv", [in_tree_pv, csi_pv])
    def test_zoned(self, clock: FakeClock, make_pv: Any) -> None:
        """In-tree and CSI PVs of a zoned disk get GA and beta region and zone."""
        responses.get(f"{DISKS}/pvc-1", json=zonal_disk())
        assert make_provider(clock).labels_for_volume(make_pv(f"{URI}/pvc-1")) == {
            labels.REGION: "westus2", labels.ZONE: "westus2-1", labels.BETA_REGION: "westus2", labels.BETA_ZONE: "westus2-1"}

    @responses.activate
    def test_unzoned_region_only(self, clock: FakeClock) -> None:
        """An unzoned disk gets the region only."""
        responses.get(f"{DISKS}/myManagedDisk", json=fixture_body("arm/compute/Disks_Get_2025-01-02.json"))
        assert make_provider(clock).labels_for_volume(in_tree_pv(f"{URI.replace('resourceGroups', 'resourcegroups')}/myManagedDisk")) == {
            labels.REGION: "westus", labels.BETA_REGION: "westus"}

    @pytest.mark.parametrize("pv", [
        in_tree_pv(f"{URI}/placeholder-for-provisioning", "placeholder-for-provisioning"),
        {"spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}}},
        {"spec": {"nfs": {"server": "x", "path": "/"}}}, {"spec": {}}, {},
    ])
    def test_not_ours(self, clock: FakeClock, pv: dict[str, Any]) -> None:
        """Non-Azure PVs and placeholders give {} without ARM calls."""
        provider = make_provider(clock)
        assert provider.labels_for_volume(pv) == {} and provider.arm_calls.total == 0

    def test_foreign_subscription_refused(self, clock: FakeClock) -> None:
        """A disk in another subscription is refused before any ARM call."""
        provider = make_provider(clock)
        other = "/subscriptions/ffffffff-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Compute/disks/d"
        with pytest.raises(errors.CloudZonesError, match="outside the configured subscription"):
            provider.labels_for_volume(csi_pv(other))
        assert provider.arm_calls.total == 0

    @pytest.mark.parametrize("uri", ["", "https://acct.blob.core.windows.net/vhds/d.vhd", f"{URI}", "/subscriptions/x/disks/d"])
    def test_invalid_uri(self, clock: FakeClock, uri: str) -> None:
        """A malformed disk URI is InvalidResourceId quoting it."""
        with pytest.raises(errors.InvalidResourceId, match="invalid disk URI"):
            make_provider(clock).labels_for_volume(in_tree_pv(uri))

    @responses.activate
    def test_missing_disk(self, clock: FakeClock) -> None:
        """A PV whose disk is gone is a CloudApiError(404)."""
        responses.get(f"{DISKS}/pvc-9", status=404, json=NOT_FOUND)
        with pytest.raises(errors.CloudApiError) as info:
            make_provider(clock).labels_for_volume(csi_pv(f"{URI}/pvc-9"))
        assert info.value.status == 404
