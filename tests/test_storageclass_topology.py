"""Tests for volume_topology: PV labels and node affinity, evaluated against real node label sets."""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cloudzones
import storageclass
from cloudzones import errors, labels, topology

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
# Kubernetes label values: empty, or alphanumerics with -_. inside, at most 63 characters.
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_GO_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int(value: str) -> int | None:
    """strconv.ParseInt(value, 10, 64), or None when Go would fail."""
    if not _GO_INT.fullmatch(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


def _requirement_matches(requirement: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement, as k8s.io/apimachinery labels.Requirement.Matches evaluates it."""
    key, operator, values = requirement["key"], requirement["operator"], requirement.get("values", [])
    for value in values:
        # The API server refuses what NewRequirement refuses: values must be valid label values.
        assert len(value) <= 63 and _LABEL_VALUE.fullmatch(value), f"invalid label value {value!r}"
    present = key in node_labels
    if operator == "In":
        assert values
        return present and node_labels[key] in values
    if operator == "NotIn":
        return not present or node_labels[key] not in values
    if operator == "Exists":
        assert not values
        return present
    if operator == "DoesNotExist":
        assert not values
        return not present
    if operator in ("Gt", "Lt"):
        assert len(values) == 1 and _parse_int(values[0]) is not None
        have = _parse_int(node_labels[key]) if present else None
        if have is None:
            return False
        want = _parse_int(values[0])
        assert want is not None
        return have > want if operator == "Gt" else have < want
    raise AssertionError(f"unknown operator {operator!r}")


def affinity_matches(affinity: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    """Whether a PV's spec.nodeAffinity admits a node: terms OR-ed, expressions AND-ed."""
    terms = affinity["required"]["nodeSelectorTerms"]
    assert terms
    return any(all(_requirement_matches(r, node_labels) for r in term["matchExpressions"]) for term in terms)


def imds_node_labels(filename: str) -> dict[str, str]:
    """The labels our node labeller gives the VM described by an IMDS fixture."""
    document = json.loads((FIXTURES / "imds" / "azure" / filename).read_text())
    compute = document.get("compute", document)
    region = topology.normalize_region(compute["location"])
    fault_domain = compute["platformFaultDomain"]
    zone = cloudzones.make_zone(region, compute["zone"]) if compute["zone"] else fault_domain
    return cloudzones.Topology(region, zone, fault_domain).node_labels()


def unzoned(region: str, fault_domain: str, *, beta: bool = True) -> dict[str, str]:
    """An unzoned node's labels as our labeller writes them (zone label = fault domain)."""
    return cloudzones.Topology(region, fault_domain, fault_domain).node_labels(beta=beta)


def zoned(region: str, number: int) -> dict[str, str]:
    """A zoned node's labels."""
    return cloudzones.Topology(region, cloudzones.make_zone(region, number), "0").node_labels()


# cloud-node-manager without our labeller: the zone label carries the fault domain, nothing else.
def stock_unzoned(region: str, fault_domain: str) -> dict[str, str]:
    """An unzoned node labelled by stock cloud-provider-azure."""
    return {labels.REGION: region, labels.ZONE: fault_domain}


# cloud-provider-azure #10222's proposal: no zone label on unzoned VMs, a fault-domain label instead.
def proposed_unzoned(region: str, fault_domain: str) -> dict[str, str]:
    """An unzoned node labelled the way cloud-provider-azure #10222 proposes."""
    return {labels.REGION: region, labels.FAULT_DOMAIN: fault_domain}


class TestFixtures:
    """The IMDS fixtures give the nodes the issue talks about."""

    def test_vmss_flex_fault_domain_36(self) -> None:
        """Azure's own IMDS sample is an unzoned VMSS Flex VM in fault domain 36."""
        node_labels = imds_node_labels("instance_full_no_zone_vmss_docs.json")
        assert node_labels[labels.ZONE] == "36" and node_labels[labels.FAULT_DOMAIN] == "36"

    def test_zoned_sample(self) -> None:
        """The zone-3 sample is zoned in westus-3."""
        assert imds_node_labels("compute_zone3_docs.json")[labels.ZONE] == "westus-3"


class TestZoned:
    """A zoned disk: region + zone labels, one term zone In [zone] AND region."""

    def test_labels_and_affinity(self) -> None:
        """GA and beta labels; one term with zone and region."""
        pv_labels, affinity = storageclass.volume_topology("eastus-2", "EastUS")
        assert pv_labels == {labels.REGION: "eastus", labels.BETA_REGION: "eastus",
                             labels.ZONE: "eastus-2", labels.BETA_ZONE: "eastus-2"}
        assert affinity == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": labels.ZONE, "operator": "In", "values": ["eastus-2"]},
            {"key": labels.REGION, "operator": "In", "values": ["eastus"]},
        ]}]}}

    def test_matches_only_its_zone(self) -> None:
        """Only nodes of that zone are admitted; unzoned nodes and other zones are not."""
        _, affinity = storageclass.volume_topology("westus-3", "westus")
        assert affinity_matches(affinity, imds_node_labels("compute_zone3_docs.json"))
        assert affinity_matches(affinity, zoned("westus", 3))
        for other in (zoned("westus", 1), zoned("eastus", 3), unzoned("westus", "0"), unzoned("westus", "3"),
                      imds_node_labels("instance_full_no_zone_vmss_docs.json"), {}):
            assert not affinity_matches(affinity, other)

    @pytest.mark.parametrize("zone", ["0", "36", "westus-1", "eastus-01", "eastus-", ""])
    def test_bad_zone(self, zone: str) -> None:
        """A fault domain or another region's zone is not a zone of the disk's region."""
        with pytest.raises(errors.InvalidZone, match=repr(zone)):
            storageclass.volume_topology(zone, "eastus")

    def test_no_region(self) -> None:
        """A region is required."""
        with pytest.raises(errors.InvalidZone, match="region"):
            storageclass.volume_topology("eastus-1", "")


class TestUnzoned:
    """An unzoned disk: every unzoned node of the region, whatever its fault domain, and no zoned node."""

    def test_labels(self) -> None:
        """Region labels only."""
        pv_labels, _ = storageclass.volume_topology(None, "westus")
        assert pv_labels == {labels.REGION: "westus", labels.BETA_REGION: "westus"}

    @pytest.mark.parametrize("fault_domain", ["0", "36"])
    def test_fault_domains_0_and_36(self, fault_domain: str) -> None:
        """Fault domain 0 (availability set) and 36 (VMSS Flex) both match, however the node was labelled."""
        _, affinity = storageclass.volume_topology(None, "westus")
        for node_labels in (unzoned("westus", fault_domain), unzoned("westus", fault_domain, beta=False),
                            stock_unzoned("westus", fault_domain), proposed_unzoned("westus", fault_domain)):
            assert affinity_matches(affinity, node_labels), node_labels

    def test_imds_sample_node(self) -> None:
        """The node built from Azure's IMDS sample (fault domain 36) is admitted."""
        _, affinity = storageclass.volume_topology(None, "westus")
        assert affinity_matches(affinity, imds_node_labels("instance_full_no_zone_vmss_docs.json"))

    def test_no_zoned_node(self) -> None:
        """Zoned nodes never match, even with a fault-domain label; nor do other regions or unlabelled nodes."""
        _, affinity = storageclass.volume_topology(None, "westus")
        rejected = [zoned("westus", n) for n in (1, 2, 3)] + [
            imds_node_labels("compute_zone3_docs.json"),
            {**zoned("westus", 1), labels.FAULT_DOMAIN: "0"},
            unzoned("eastus", "0"), unzoned("eastus", "36"), stock_unzoned("eastus", "1"), {},
            {labels.REGION: "westus"},
        ]
        for node_labels in rejected:
            assert not affinity_matches(affinity, node_labels), node_labels

    @settings(max_examples=50, deadline=None)
    @given(st.integers(min_value=0, max_value=10**9))
    def test_any_fault_domain(self, fault_domain: int) -> None:
        """Any non-negative fault domain matches."""
        _, affinity = storageclass.volume_topology(None, "westus")
        assert affinity_matches(affinity, unzoned("westus", str(fault_domain)))

    @settings(max_examples=50, deadline=None)
    @given(st.integers(min_value=0, max_value=99), st.from_regex(r"[a-z]{2,8}[0-9]?", fullmatch=True))
    def test_no_availability_zone(self, number: int, region: str) -> None:
        """No availability zone label, of any region, matches."""
        _, affinity = storageclass.volume_topology(None, region)
        assert not affinity_matches(affinity, zoned(region, number))


class TestZoneRedundant:
    """A ZRS disk: region label only, usable from every node of the region."""

    def test_labels_and_affinity(self) -> None:
        """Region labels; one term on the region."""
        pv_labels, affinity = storageclass.volume_topology(None, "westus", zone_redundant=True)
        assert pv_labels == {labels.REGION: "westus", labels.BETA_REGION: "westus"}
        assert affinity == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": labels.REGION, "operator": "In", "values": ["westus"]}]}]}}

    def test_every_node_of_the_region(self) -> None:
        """Zoned and unzoned nodes of the region match; other regions do not."""
        _, affinity = storageclass.volume_topology(None, "westus", zone_redundant=True)
        for node_labels in (zoned("westus", 1), zoned("westus", 3), unzoned("westus", "0"),
                            unzoned("westus", "36"), imds_node_labels("instance_full_no_zone_vmss_docs.json")):
            assert affinity_matches(affinity, node_labels)
        assert not affinity_matches(affinity, zoned("eastus", 1))

    def test_zone_refused(self) -> None:
        """A zone-redundant disk has no zone."""
        with pytest.raises(errors.InvalidZone, match="zone-redundant"):
            storageclass.volume_topology("westus-1", "westus", zone_redundant=True)
