"""Tests for Azure provider-ID, resource-ID, disk-URI and VMSS computer-name parsing."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudzones import errors
from providers.azure import parse_provider_id, parse_resource_id, vmss_instance_id
from providers.azure.resource_ids import disk_uri, parse_disk_uri, vmss_computer_name, vmss_computer_name_prefix

SUB = "00000000-0000-0000-0000-000000000001"


class TestParseProviderId:
    """parse_provider_id understands VM and VMSS provider IDs."""

    def test_standalone_vm(self) -> None:
        """A VM provider ID yields subscription, group and name."""
        rid = parse_provider_id(f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1")
        assert rid is not None
        assert (rid.subscription, rid.resource_group, rid.resource_type, rid.name) == (SUB, "rg", "virtualMachines", "vm-1")
        assert not rid.is_scale_set_instance

    def test_vmss_instance(self) -> None:
        """A VMSS provider ID yields the scale set and decimal instance id."""
        rid = parse_provider_id(
            f"azure:///subscriptions/{SUB}/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/12")
        assert rid is not None and rid.is_scale_set_instance
        assert (rid.scale_set, rid.instance_id, rid.name) == ("ss", "12", "ss_12")

    @pytest.mark.parametrize("group", ["resourceGroups", "resourcegroups", "RESOURCEGROUPS"])
    def test_any_case_resource_group_segment(self, group: str) -> None:
        """The resourceGroups segment and its value may be any case."""
        rid = parse_provider_id(f"azure:///subscriptions/{SUB}/{group}/MyRG/providers/microsoft.compute/virtualMachines/vm")
        assert rid is not None and rid.same_group("myrg") and rid.resource_group == "MyRG"

    @pytest.mark.parametrize("pid", ["aws:///us-west-2a/i-0123", "gce://project/us-central1-a/vm", "kind://docker/x",
                                     "azure://not-a-path", "whatever"])
    def test_foreign_scheme_is_none(self, pid: str) -> None:
        """IDs another provider manages are not ours: None."""
        assert parse_provider_id(pid) is None

    def test_empty_raises(self) -> None:
        """An empty provider ID means the node is not initialised: an error, not 'unmanaged'."""
        with pytest.raises(errors.InvalidResourceId, match="not initialized"):
            parse_provider_id("")

    @pytest.mark.parametrize("pid", [
        f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines",
        f"azure:///subscriptions/{SUB}/resourceGroups//providers/Microsoft.Compute/virtualMachines/vm",
        f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/x1",
        f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic",
        f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/disks/d1",
    ])
    def test_malformed_azure_ids_raise(self, pid: str) -> None:
        """A malformed Azure ID raises InvalidResourceId quoting it."""
        with pytest.raises(errors.InvalidResourceId) as info:
            parse_provider_id(pid)
        assert repr(pid) in str(info.value)

    def test_disk_managed_by_form(self) -> None:
        """managedBy's <ss>_<id> instance form is accepted."""
        rid = parse_resource_id(
            f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/k8s-vmss/virtualMachines/k8s-vmss_1")
        assert rid.instance_id == "1"

    @given(st.text(max_size=60))
    def test_fuzz_only_contract_errors(self, text: str) -> None:
        """Arbitrary strings give None, a ResourceId or InvalidResourceId — nothing else."""
        for candidate in (text, "azure://" + text, "azure:///subscriptions/" + text):
            with contextlib.suppress(errors.InvalidResourceId):
                parse_provider_id(candidate)


class TestDiskUri:
    """Disk URIs parse in exactly the managed-disk shape."""

    def test_round_trip(self) -> None:
        """disk_uri and parse_disk_uri agree."""
        rid = parse_disk_uri(disk_uri(SUB, "rg", "pvc-1"))
        assert (rid.subscription, rid.resource_group, rid.name) == (SUB, "rg", "pvc-1")

    @pytest.mark.parametrize("uri", ["", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks",
                                     "https://acct.blob.core.windows.net/vhds/d.vhd",
                                     "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v"])
    def test_invalid(self, uri: str) -> None:
        """Anything else is InvalidResourceId with the URI."""
        with pytest.raises(errors.InvalidResourceId, match="invalid disk URI"):
            parse_disk_uri(uri)


class TestVmssInstanceId:
    """VMSS computer names end in six base-36 digits."""

    @pytest.mark.parametrize(("name", "expected"), [("vm00000Z", "35"), ("vmss00000a", "10"),
                                                    ("aks-nodepool1-12345678-vmss000000", "0"), ("000010", "36")])
    def test_valid(self, name: str, expected: str) -> None:
        """Base 36, case-insensitive."""
        assert vmss_instance_id(name) == expected

    @pytest.mark.parametrize("name", ["", "abc", "vm0000_1", "vm-00001", "vm 00001", "vm+00001"])
    def test_invalid(self, name: str) -> None:
        """Short names and non-base-36 suffixes are refused."""
        with pytest.raises(errors.InvalidResourceId):
            vmss_instance_id(name)

    @given(st.integers(min_value=0, max_value=36**6 - 1))
    def test_computer_name_round_trip(self, instance: int) -> None:
        """vmss_computer_name and vmss_instance_id are inverses."""
        assert vmss_instance_id(vmss_computer_name("aks-np-vmss", instance)) == str(instance)

    @pytest.mark.parametrize("instance", [-1, 36**6, True, "1"])
    def test_computer_name_bad_instance(self, instance: object) -> None:
        """Instance ids outside six base-36 digits are refused."""
        with pytest.raises(errors.InvalidResourceId):
            vmss_computer_name("vm", instance)  # type: ignore[arg-type]

    def test_prefix(self) -> None:
        """The prefix is everything before the id."""
        assert vmss_computer_name_prefix("aks-np-vmss00000a") == "aks-np-vmss"
