"""Tests for the pure zone model: zone ids, zone labels, Topology and its labels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cloudzones
from cloudzones import errors, labels, topology
from cloudzones.topology import normalize_region, parse_zone_id


class TestMakeZone:
    """make_zone builds <region>-<n> labels."""

    @pytest.mark.parametrize(
        ("region", "zone", "expected"),
        [("EASTUS", 2, "eastus-2"), ("eastus", "01", "eastus-1"), ("westus2", "3", "westus2-3"),
         ("West US", "1", "westus-1"), ("eastus", 0, "eastus-0")],
    )
    def test_valid(self, region: str, zone: int | str, expected: str) -> None:
        """Valid ids give lower-case region plus the integer."""
        assert cloudzones.make_zone(region, zone) == expected

    @pytest.mark.parametrize("zone", ["a", " 1", "1_0", "", "+2", "-1", "1 ", "١", -1, True, 1.0, None,
                                      "1234567890", 10**9])
    def test_invalid(self, zone: object) -> None:
        """Anything that is not non-negative ASCII digits (at most nine) raises InvalidZone naming the value."""
        with pytest.raises(errors.InvalidZone) as info:
            cloudzones.make_zone("eastus", zone)  # type: ignore[arg-type]
        assert repr(zone) in str(info.value)

    @pytest.mark.parametrize("zone", ["9" * 5000, 10**4000])
    def test_huge_ids_refused(self, zone: object) -> None:
        """A 5,000-digit id is refused as a zone id, never the ValueError int() and str() raise past 4,300 digits."""
        with pytest.raises(errors.InvalidZone, match="at most 9 digits|1-9 digits"):
            cloudzones.make_zone("eastus", zone)  # type: ignore[arg-type]
        assert cloudzones.zone_id(f"eastus-{'9' * 5000}", "eastus") == ""
        assert not topology.is_fault_domain("9" * 5000)

    def test_invalid_zone_is_value_error(self) -> None:
        """InvalidZone is also a ValueError and a CloudZonesError."""
        with pytest.raises(ValueError):
            parse_zone_id("x")
        assert issubclass(errors.InvalidZone, errors.CloudZonesError)

    def test_empty_region_refused(self) -> None:
        """An empty region would produce '-2' (cloud-provider-azure #219): refused."""
        with pytest.raises(errors.InvalidZone, match="without a region"):
            cloudzones.make_zone("", 2)

    @given(st.integers(min_value=0, max_value=10**6))
    def test_round_trip(self, number: int) -> None:
        """zone_id inverts make_zone."""
        label = cloudzones.make_zone("EastUS", number)
        assert cloudzones.zone_id(label, "eastus") == str(number)
        assert cloudzones.is_availability_zone(label, "EASTUS")


class TestIsAvailabilityZone:
    """is_availability_zone tells AZ labels from fault domains and foreign regions."""

    @pytest.mark.parametrize(
        ("label", "region", "expected"),
        [("eastus-1", "eastus", True), ("0", "eastus", False), ("chinanorth-1", "eastus", False),
         ("eastus-", "eastus", False), ("eastus-a", "eastus", False), ("eastus2-1", "eastus", False),
         ("", "eastus", False), ("eastus-1", "", False), ("eastus-01", "eastus", True)],
    )
    def test_cases(self, label: str, region: str, expected: bool) -> None:
        """Only <region>-<digits> of the same region is an availability zone."""
        assert cloudzones.is_availability_zone(label, region) is expected

    def test_zone_id(self) -> None:
        """zone_id returns the number, or '' for fault domains."""
        assert cloudzones.zone_id("eastus-01", "eastus") == "1"
        assert cloudzones.zone_id("0", "eastus") == ""

    @given(st.text(max_size=4))
    def test_fault_domains_never_zones(self, value: str) -> None:
        """No value without the region prefix is ever a zone."""
        assert not cloudzones.is_availability_zone(value, "eastus") or value.startswith("eastus-")


class TestTopology:
    """Topology carries labels and the AZ/fault-domain distinction."""

    def test_zoned_labels(self) -> None:
        """A zoned topology yields GA and beta keys."""
        topo = cloudzones.Topology("eastus", "eastus-2", "0")
        assert topo.is_availability_zone
        assert topo.labels() == {
            labels.REGION: "eastus", labels.ZONE: "eastus-2",
            labels.BETA_REGION: "eastus", labels.BETA_ZONE: "eastus-2",
        }
        assert topo.labels(beta=False) == {labels.REGION: "eastus", labels.ZONE: "eastus-2"}
        assert labels.FAULT_DOMAIN not in topo.node_labels()

    def test_unzoned_labels(self) -> None:
        """An unzoned VM's zone label is its fault domain, and node labels add the fault-domain key."""
        topo = cloudzones.Topology("eastus", "36", "36", sub_fault_domain="15")
        assert not topo.is_availability_zone
        assert topo.node_labels(beta=False) == {
            labels.REGION: "eastus", labels.ZONE: "36",
            labels.FAULT_DOMAIN: "36", labels.SUB_FAULT_DOMAIN: "15",
        }

    def test_unknown_zone_left_out(self) -> None:
        """An empty zone never becomes an empty label."""
        assert cloudzones.Topology("eastus", "").labels() == {labels.REGION: "eastus", labels.BETA_REGION: "eastus"}

    def test_frozen(self) -> None:
        """Topology is immutable and hashable."""
        topo = cloudzones.Topology("eastus", "eastus-1")
        with pytest.raises(AttributeError):
            topo.zone = "x"  # type: ignore[misc]
        assert hash(topo) == hash(cloudzones.Topology("eastus", "eastus-1"))

    def test_normalize_region(self) -> None:
        """Locations lose case and spaces."""
        assert normalize_region(" West US ") == "westus"
