"""Tests for tolerated_zone_failures and failure_report (grafana/dskit zone-aware ring rules)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones import errors
from cloudzones.placement import FailureReport, failure_report, tolerated_zone_failures


class TestToleratedZoneFailures:
    """Zone losses that keep a write quorum with one replica per zone."""

    @pytest.mark.parametrize(("rf", "zones", "expected"), [
        (3, 3, 1), (3, 2, 0), (3, 1, 0), (3, 5, 1), (5, 5, 2), (5, 3, 0), (4, 4, 1), (2, 2, 0), (1, 1, 0),
        (1, 0, 0), (3, 0, 0),
    ])
    def test_table(self, rf: int, zones: int, expected: int) -> None:
        """min(zones, rf) replicas minus the quorum rf // 2 + 1, never below 0."""
        assert tolerated_zone_failures(rf, zones) == expected

    @pytest.mark.parametrize(("rf", "zones"), [(0, 3), (-1, 3), (3, -1), (True, 3), (3, 2.0)])
    def test_invalid(self, rf: object, zones: object) -> None:
        """A replication factor below 1 or a negative/non-integer zone count is refused naming the value."""
        with pytest.raises(errors.InvalidPlacementSpec):
            tolerated_zone_failures(rf, zones)  # type: ignore[arg-type]

    @settings(max_examples=100, deadline=None)
    @given(rf=st.integers(1, 12), zones=st.integers(0, 12))
    def test_losing_that_many_zones_keeps_quorum(self, rf: int, zones: int) -> None:
        """After losing exactly the tolerated zones a quorum survives; one more zone and it would not."""
        tolerated = tolerated_zone_failures(rf, zones)
        replicas = min(zones, rf)
        quorum = rf // 2 + 1
        if replicas >= quorum:
            assert replicas - tolerated >= quorum > replicas - tolerated - 1
        else:
            assert tolerated == 0


class TestFailureReport:
    """failure_report: reads and writes tolerance, quorum, the zones holding replicas."""

    def test_three_zones(self) -> None:
        """RF 3 over 3 zones: quorum 2, one zone may be lost for writes and for reads."""
        report = failure_report({"z1": 2, "z2": 2, "z3": 1}, 3)
        assert report == FailureReport(
            replication_factor=3, zones=("z1", "z2", "z3"), instances_per_zone=(("z1", 2), ("z2", 2), ("z3", 1)),
            replicas_per_key=3, quorum=2, write_zone_failures=1, read_zone_failures=1, writes_possible=True)

    def test_fewer_zones_than_rf(self) -> None:
        """RF 3 over 2 zones (dskit T3/T7): writes tolerate 0 zones, reads still tolerate 1; a note says why."""
        report = failure_report(["z1", "z2", "z1"], 3)
        assert (report.replicas_per_key, report.write_zone_failures, report.read_zone_failures) == (2, 0, 1)
        assert report.writes_possible
        assert any("2 zone(s) for replication factor 3" in note for note in report.notes)

    def test_one_zone_cannot_write(self) -> None:
        """RF 3 in one zone: a key has 1 replica, below the quorum of 2, so writes are impossible."""
        report = failure_report({"z1": 6, "z2": 0}, 3)
        assert report.zones == ("z1",) and not report.writes_possible
        assert any("writes fail" in note for note in report.notes)

    def test_even_rf_note_and_reads(self) -> None:
        """RF 4 over 4 zones: writes tolerate 1 zone, dskit reads tolerate floor(4 / 2) = 2."""
        report = failure_report(["a", "b", "c", "d"], 4)
        assert (report.write_zone_failures, report.read_zone_failures) == (1, 2)
        assert any("even replication factor" in note for note in report.notes)

    def test_empty_and_invalid(self) -> None:
        """No instances: nothing possible; a negative count or a bare string is refused."""
        assert not failure_report({}, 3).writes_possible
        with pytest.raises(errors.InvalidPlacementSpec, match="-1"):
            failure_report({"z1": -1}, 3)
        with pytest.raises(errors.InvalidPlacementSpec, match="'z1'"):
            failure_report("z1", 3)

    @settings(max_examples=100, deadline=None)
    @given(zones=st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=12), rf=st.integers(1, 7))
    def test_write_tolerance_matches_tolerated_zone_failures(self, zones: list[str], rf: int) -> None:
        """The report's write tolerance is tolerated_zone_failures over the zones actually used."""
        report = failure_report(zones, rf)
        assert report.write_zone_failures == tolerated_zone_failures(rf, len(set(zones)))
        assert report.read_zone_failures == min(len(set(zones)), rf) // 2
