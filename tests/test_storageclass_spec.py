"""Tests for StorageClassSpec.from_manifest: every StorageClass rule, its error and its defaults."""

from __future__ import annotations

from typing import Any

import pytest

from cloudzones import errors, labels
from storageclass import Rule, StorageClassSpec


def manifest(parameters: dict[str, Any] | None = None, *, binding: str | None = None,
             allowed: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A StorageClass manifest named 'fast' with the given parameters and fields."""
    result: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                              "metadata": {"name": "fast"}, "provisioner": "kubernetes.io/azure-disk"}
    if parameters is not None:
        result["parameters"] = parameters
    if binding is not None:
        result["volumeBindingMode"] = binding
    if allowed is not None:
        result["allowedTopologies"] = allowed
    result.update(extra)
    return result


def topology_term(*values: str, key: str = labels.ZONE) -> dict[str, Any]:
    """One allowedTopologies term allowing ``values`` under ``key``."""
    return {"matchLabelExpressions": [{"key": key, "values": list(values)}]}


def broken(rule: Rule, spec_manifest: dict[str, Any], *, region: str | None = "eastus") -> str:
    """The message of the InvalidStorageClass raised for ``spec_manifest``, checking its rule."""
    with pytest.raises(errors.InvalidStorageClass) as info:
        StorageClassSpec.from_manifest(spec_manifest, region=region)
    assert info.value.rule == rule.value
    message = str(info.value)
    assert f"rule {rule.value!r}" in message and "'fast'" in message
    return message


class TestDefaults:
    """A bare class is a zoned Premium_LRS managed disk class with Kubernetes' defaults."""

    def test_empty_class(self) -> None:
        """No parameters: managed, zoned, Premium_LRS, ReadOnly caching, ext4, Immediate, Delete."""
        spec = StorageClassSpec.from_manifest(manifest())
        assert (spec.name, spec.kind, spec.zoned, spec.sku, spec.caching_mode, spec.fs_type) == \
            ("fast", "Managed", True, "Premium_LRS", "ReadOnly", "ext4")
        assert (spec.binding_mode, spec.reclaim_policy, spec.zone, spec.zones, spec.allowed_zones) == \
            ("Immediate", "Delete", None, (), ())
        assert not spec.zone_redundant and not spec.wait_for_first_consumer and spec.region is None

    def test_full_class(self) -> None:
        """Every modelled field is read, names matched case-insensitively."""
        spec = StorageClassSpec.from_manifest(manifest(
            {"SKUName": "standardssd_lrs", "CachingMode": "readwrite", "fsType": "XFS", "resourceGroup": "rg1",
             "Zones": "eastus-2, eastus-1,eastus-2", "tags": "a=b"},
            reclaimPolicy="Retain", allowVolumeExpansion=True, mountOptions=["discard"]), region="EastUS")
        assert (spec.sku, spec.caching_mode, spec.fs_type, spec.resource_group) == \
            ("StandardSSD_LRS", "ReadWrite", "xfs", "rg1")
        assert (spec.zones, spec.reclaim_policy, spec.allow_volume_expansion, spec.mount_options) == \
            (("eastus-1", "eastus-2"), "Retain", True, ("discard",))
        assert spec.region == "eastus" and spec.parameters["tags"] == "a=b"

    def test_storageaccounttype_alias(self) -> None:
        """storageaccounttype is the in-tree name for the SKU; agreeing duplicates are fine."""
        assert StorageClassSpec.from_manifest(manifest({"storageaccounttype": "Premium_ZRS"})).sku == "Premium_ZRS"
        both = manifest({"storageaccounttype": "premium_zrs", "skuname": "Premium_ZRS"})
        assert StorageClassSpec.from_manifest(both).zone_redundant

    @pytest.mark.parametrize("sku", ["PremiumV2_LRS", "UltraSSD_LRS"])
    def test_uncached_skus_default_to_no_caching(self, sku: str) -> None:
        """SKUs without host caching default to cachingMode None."""
        assert StorageClassSpec.from_manifest(manifest({"skuName": sku})).caching_mode == "None"

    @pytest.mark.parametrize(("kind", "zoned"), [("managed", True), ("Shared", False), ("DEDICATED", False)])
    def test_zoned_default_depends_on_kind(self, kind: str, zoned: bool) -> None:
        """zoned defaults to true for managed disks only."""
        spec = StorageClassSpec.from_manifest(manifest({"kind": kind}))
        assert spec.zoned is zoned and spec.kind == kind.capitalize()

    @pytest.mark.parametrize(("value", "zoned"), [("true", True), ("false", False), ("True", True),
                                                  ("FALSE", False), ("", True)])
    def test_zoned_strings(self, value: str, zoned: bool) -> None:
        """zoned is the string "true" or "false" (any case); empty means the default."""
        assert StorageClassSpec.from_manifest(manifest({"zoned": value})).zoned is zoned

    def test_location_gives_region(self) -> None:
        """Without a cluster region the location parameter is the region zones are checked against."""
        spec = StorageClassSpec.from_manifest(manifest({"location": "West US", "zone": "westus-2"}), region=None)
        assert (spec.region, spec.location, spec.zone) == ("westus", "westus", "westus-2")

    def test_wait_for_first_consumer_with_allowed_topologies(self) -> None:
        """allowedTopologies terms are OR-ed: their zone values are unioned, GA and beta keys alike."""
        spec = StorageClassSpec.from_manifest(manifest(
            binding="WaitForFirstConsumer",
            allowed=[topology_term("eastus-2"), topology_term("eastus-1", "eastus-2", key=labels.BETA_ZONE)]),
            region="eastus")
        assert spec.wait_for_first_consumer and spec.allowed_zones == ("eastus-1", "eastus-2")

    def test_empty_allowed_topologies_is_unset(self) -> None:
        """An empty allowedTopologies list means no constraint."""
        assert StorageClassSpec.from_manifest(manifest(allowed=[])).allowed_zones == ()

    def test_csi_parameters_accepted(self) -> None:
        """CSI driver parameters and the csi.storage.k8s.io/ family are known."""
        spec = StorageClassSpec.from_manifest(manifest(
            {"networkAccessPolicy": "DenyAll", "csi.storage.k8s.io/fstype": "xfs"},
            provisioner="disk.csi.azure.com"))
        assert spec.fs_type == "xfs" and spec.provisioner == "disk.csi.azure.com"

    def test_frozen_and_hashable(self) -> None:
        """The spec is an immutable value."""
        spec = StorageClassSpec.from_manifest(manifest({"zone": "eastus-1"}), region="eastus")
        assert hash(spec) == hash(StorageClassSpec.from_manifest(manifest({"zone": "eastus-1"}), region="eastus"))
        with pytest.raises(AttributeError):
            spec.zone = "eastus-2"  # type: ignore[misc]
        with pytest.raises(TypeError):
            spec.parameters["zone"] = "eastus-2"  # type: ignore[index]


class TestRules:
    """Each rule of the issue raises InvalidStorageClass naming the rule and the values."""

    @pytest.mark.parametrize("value", ["yes", "1", "t", "no", "on"])
    def test_zoned_value(self, value: str) -> None:
        """zoned accepts only "true"/"false"."""
        assert repr(value) in broken(Rule.ZONED_VALUE, manifest({"zoned": value}))

    def test_zoned_value_not_a_string(self) -> None:
        """An unquoted YAML boolean is not what Kubernetes passes: quote it."""
        message = broken(Rule.MANIFEST, manifest({"zoned": True}))
        assert "zoned" in message and "quote" in message

    def test_zoned_needs_managed(self) -> None:
        """zoned=true with a blob disk kind is refused."""
        assert "'Shared'" in broken(Rule.ZONED_KIND, manifest({"kind": "shared", "zoned": "true"}))

    def test_kind(self) -> None:
        """Unknown kinds are refused."""
        assert "'premium'" in broken(Rule.KIND, manifest({"kind": "premium"}))

    def test_resource_group_needs_managed(self) -> None:
        """resourceGroup only applies to managed disks."""
        assert "'rg1'" in broken(Rule.RESOURCE_GROUP_KIND, manifest({"kind": "dedicated", "resourceGroup": "rg1"}))

    @pytest.mark.parametrize("name", ["zone", "zones", "allowedTopologies"])
    def test_zone_requires_zoned(self, name: str) -> None:
        """zone, zones and allowedTopologies need zoned not false."""
        if name == "allowedTopologies":
            spec_manifest = manifest({"zoned": "false"}, allowed=[topology_term("eastus-1")])
        else:
            spec_manifest = manifest({"zoned": "false", name: "eastus-1"})
        message = broken(Rule.ZONE_REQUIRES_ZONED, spec_manifest)
        assert name in message and "eastus-1" in message

    def test_zone_and_zones(self) -> None:
        """zone and zones together are refused, both quoted."""
        message = broken(Rule.ZONE_AND_ZONES, manifest({"zone": "eastus-1", "zones": "eastus-2,eastus-3"}))
        assert "zone='eastus-1'" in message and "zones='eastus-2,eastus-3'" in message

    @pytest.mark.parametrize("name", ["zone", "zones"])
    def test_zone_and_allowed_topologies(self, name: str) -> None:
        """zone/zones with allowedTopologies are refused."""
        message = broken(Rule.ZONE_AND_ALLOWED_TOPOLOGIES,
                         manifest({name: "eastus-1"}, allowed=[topology_term("eastus-2")]))
        assert f"{name}='eastus-1'" in message and "eastus-2" in message

    @pytest.mark.parametrize("name", ["zone", "zones"])
    def test_zone_with_wait_for_first_consumer(self, name: str) -> None:
        """zone/zones with WaitForFirstConsumer are refused, pointing at allowedTopologies."""
        message = broken(Rule.ZONE_WITH_WAIT_FOR_FIRST_CONSUMER,
                         manifest({name: "eastus-1"}, binding="WaitForFirstConsumer"))
        assert f"{name}='eastus-1'" in message and "allowedTopologies" in message

    @pytest.mark.parametrize("sku", ["Premium_ZRS", "StandardSSD_ZRS"])
    def test_zone_with_zone_redundant_sku(self, sku: str) -> None:
        """A zone-redundant SKU cannot be pinned to a zone."""
        message = broken(Rule.ZONE_WITH_ZONE_REDUNDANT_SKU, manifest({"skuName": sku, "zone": "eastus-1"}))
        assert sku in message and "eastus-1" in message

    @pytest.mark.parametrize("key", [labels.REGION, "topology.disk.csi.azure.com/zone", "kubernetes.io/hostname"])
    def test_allowed_topologies_key(self, key: str) -> None:
        """Only the GA and beta zone keys are accepted in allowedTopologies."""
        message = broken(Rule.ALLOWED_TOPOLOGIES_KEY, manifest(allowed=[topology_term("eastus-1", key=key)]))
        assert repr(key) in message

    @pytest.mark.parametrize("term", [{"matchLabelExpressions": []}, {},
                                      {"matchLabelExpressions": [{"key": labels.ZONE, "values": []}]},
                                      {"matchLabelExpressions": [{"key": labels.ZONE}]}])
    def test_allowed_topologies_values(self, term: dict[str, Any]) -> None:
        """A term without zone values cannot allow anything."""
        broken(Rule.ALLOWED_TOPOLOGIES_VALUES, manifest(allowed=[term]))

    @pytest.mark.parametrize("value", ["", ",", "eastus-1, , eastus-2", ", eastus-1", "eastus-1,"])
    def test_zones_list(self, value: str) -> None:
        """zones must not contain empty entries (Kubernetes' ZonesToSet errors)."""
        assert repr(value) in broken(Rule.ZONES_LIST, manifest({"zones": value}))

    @pytest.mark.parametrize(("name", "value"), [
        ("zone", "0"), ("zone", "2"), ("zone", "westus-1"), ("zone", "eastus2-1"), ("zone", "1"),
        ("zone", "eastus-01"), ("zone", "EASTUS-1"), ("zone", " eastus-1"), ("zone", ""), ("zones", "eastus-1,0"),
    ])
    def test_zone_format_with_region(self, name: str, value: str) -> None:
        """With the region known, zone values must be <region>-<n> of it; "0" is a fault domain, never a zone."""
        message = broken(Rule.ZONE_FORMAT, manifest({name: value}))
        assert "eastus-1" in message  # the example of a right value

    def test_zone_format_names_the_value(self) -> None:
        """The offending value and the region are quoted."""
        message = broken(Rule.ZONE_FORMAT, manifest({"zone": "westus-1"}))
        assert "'westus-1'" in message and "'eastus'" in message

    def test_fault_domain_zone_explained(self) -> None:
        """A zone of "0" is explained as a fault domain, even without a region."""
        assert "fault domain" in broken(Rule.ZONE_FORMAT, manifest({"zone": "0"}), region=None)

    def test_allowed_topologies_format(self) -> None:
        """allowedTopologies values are zone values too."""
        assert "'westus-2'" in broken(Rule.ZONE_FORMAT, manifest(allowed=[topology_term("eastus-1", "westus-2")]))

    def test_zone_shape_without_region(self) -> None:
        """Without a region any <region>-<n> is accepted, other shapes are not."""
        assert StorageClassSpec.from_manifest(manifest({"zones": "westus-1,eastus-2"})).zones == \
            ("eastus-2", "westus-1")
        broken(Rule.ZONE_FORMAT, manifest({"zone": "us-east-1a"}), region=None)

    @pytest.mark.parametrize("value", ["Premium", "NOT_EXISTING", "Premium_GRS"])
    def test_sku(self, value: str) -> None:
        """Unknown SKUs are refused, listing the supported ones."""
        message = broken(Rule.SKU, manifest({"skuName": value}))
        assert repr(value) in message and "StandardSSD_ZRS" in message

    def test_sku_aliases_disagree(self) -> None:
        """skuName and storageaccounttype must not disagree."""
        message = broken(Rule.SKU, manifest({"skuName": "Premium_LRS", "storageaccounttype": "Standard_LRS"}))
        assert "'Premium_LRS'" in message and "'Standard_LRS'" in message

    def test_caching_mode(self) -> None:
        """Unknown caching modes are refused."""
        assert "'Fast'" in broken(Rule.CACHING_MODE, manifest({"cachingMode": "Fast"}))

    def test_caching_mode_on_uncached_sku(self) -> None:
        """PremiumV2/Ultra disks support no host caching."""
        message = broken(Rule.CACHING_MODE, manifest({"skuName": "UltraSSD_LRS", "cachingMode": "ReadOnly"}))
        assert "UltraSSD_LRS" in message

    def test_binding_mode(self) -> None:
        """volumeBindingMode must be one of the two API values, spelled exactly."""
        assert "'waitforfirstconsumer'" in broken(Rule.BINDING_MODE, manifest(binding="waitforfirstconsumer"))

    def test_reclaim_policy(self) -> None:
        """Recycle is not a dynamic-provisioning policy."""
        assert "'Recycle'" in broken(Rule.RECLAIM_POLICY, manifest(reclaimPolicy="Recycle"))

    def test_location_against_region(self) -> None:
        """A location other than the cluster's region is refused."""
        message = broken(Rule.LOCATION, manifest({"location": "westus"}))
        assert "'westus'" in message and "'eastus'" in message

    def test_unknown_parameter(self) -> None:
        """A misspelt parameter is refused instead of silently ignored."""
        assert "'zonned'" in broken(Rule.UNKNOWN_PARAMETER, manifest({"zonned": "false"}))

    def test_duplicate_parameter(self) -> None:
        """Two spellings of one parameter are refused."""
        message = broken(Rule.DUPLICATE_PARAMETER, manifest({"zone": "eastus-1", "Zone": "eastus-2"}))
        assert "'zone'" in message and "'Zone'" in message

    @pytest.mark.parametrize("bad", [
        {"kind": "PersistentVolume"}, {"parameters": ["zone"]}, {"allowedTopologies": {"a": 1}},
    ])
    def test_manifest_shape(self, bad: dict[str, Any]) -> None:
        """The manifest must be a StorageClass with a parameter map and a list of topology terms."""
        broken(Rule.MANIFEST, {**manifest(), **bad})

    def test_not_a_mapping(self) -> None:
        """A non-mapping manifest is refused."""
        with pytest.raises(errors.InvalidStorageClass, match="list"):
            StorageClassSpec.from_manifest([])  # type: ignore[arg-type]

    def test_is_value_error(self) -> None:
        """InvalidStorageClass is a ValueError and a CloudZonesError."""
        with pytest.raises(ValueError):
            StorageClassSpec.from_manifest(manifest({"zoned": "maybe"}))


class TestProvisioner:
    """Only StorageClasses of an Azure disk provisioner get zones."""

    @pytest.mark.parametrize("name", ["kubernetes.io/azure-disk", "disk.csi.azure.com", "cloudzones.io/azure-disk"])
    def test_azure_disk_provisioners(self, name: str) -> None:
        """The in-tree, CSI and cloudzones provisioners are accepted."""
        assert StorageClassSpec.from_manifest({**manifest(), "provisioner": name}).provisioner == name

    def test_other_provisioner_refused(self) -> None:
        """An NFS provisioner's StorageClass is refused with the provisioner rule, not given a zone."""
        message = broken(Rule.PROVISIONER, {**manifest(), "provisioner": "nfs.csi.k8s.io"})
        assert "'nfs.csi.k8s.io' does not create Azure disks" in message

    def test_custom_name(self) -> None:
        """A provisioner running under its own name can accept its StorageClasses."""
        spec = StorageClassSpec.from_manifest({**manifest(), "provisioner": "example.com/disks"},
                                              provisioners={"example.com/disks"})
        assert spec.provisioner == "example.com/disks"
