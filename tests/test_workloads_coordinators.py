"""Tests for FoundationDB locality resolution and coordinator selection (three_data_hall, multi-DC, flat)."""

from __future__ import annotations

import pathlib
import random
from collections import Counter
from typing import Any

import pytest
import yaml
from workload_helpers import HOSTNAME, ZONE, node, rules, zoned_nodes

from cloudzones import errors
from cloudzones.workloads import coordinators, fdblocality, findings

PLANS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "plans"
STORAGE_FIRST = [{"processClass": "storage", "priority": 2147483647}, {"processClass": "log", "priority": 0}]


def cluster(mode: str, processes: list[dict[str, Any]] | None, *, localities: list[dict[str, Any]] | None = None,
            selection: list[dict[str, Any]] | None = None, regions: int = 1, **spec: Any) -> dict[str, Any]:
    """A FoundationDBCluster whose localities default to env vars FDB_ZONE, and FDB_HALL / FDB_DC where the mode needs them."""
    if localities is None:
        localities = [{"key": "zoneid", "envValue": "FDB_ZONE"}]
        if mode == "three_data_hall":
            localities.append({"key": "locality_data_hall", "envValue": "FDB_HALL"})
        if mode == "three_datacenter" or regions > 1:
            localities.append({"key": "dcid", "envValue": "FDB_DC"})
    body: dict[str, Any] = {
        "version": "7.1.57", "databaseConfiguration": {"redundancy_mode": mode, "usable_regions": regions},
        "localities": localities, **spec}
    if selection is not None:
        body["coordinatorSelection"] = selection
    manifest: dict[str, Any] = {"kind": "FoundationDBCluster", "metadata": {"name": "fdb"}, "spec": body}
    if processes is not None:
        manifest["processes"] = processes
    return manifest


def proc(pid: str, cls: str, *, node_name: str = "", **env: str) -> dict[str, Any]:
    """A process entry."""
    return {"id": pid, "processClass": cls, "node": node_name, "env": env}


def halls(storage: int = 8, logs: int = 4, zones_per_hall: int | None = None) -> list[dict[str, Any]]:
    """Three data halls A, B, C of storage + log processes; each process its own zone unless limited."""
    result = []
    for hall in "ABC":
        for cls, count in (("storage", storage), ("log", logs)):
            for i in range(count):
                zone = f"{hall}-{cls}-{i}" if zones_per_hall is None else f"{hall}-z{i % zones_per_hall}"
                result.append(proc(f"{hall}-{cls}-{i}", cls, FDB_ZONE=zone, FDB_HALL=hall))
    return result


class TestCountsAndLimits:
    """Coordinator counts, hard limits and class priorities."""

    @pytest.mark.parametrize(("mode", "regions", "count"), [
        ("single", 1, 1), ("double", 1, 3), ("triple", 1, 5), ("three_data_hall", 1, 9),
        ("three_datacenter", 1, 9), ("double", 2, 9)])
    def test_desired_coordinators(self, mode: str, regions: int, count: int) -> None:
        """9 for hall/datacenter modes and multi-region, else 1/3/5."""
        assert coordinators.desired_coordinators(mode, regions) == count

    def test_hard_limits(self) -> None:
        """zoneid 1 always; data_hall 3, dcid 3; multi-region dcid = ceil(9 / DCs)."""
        assert coordinators.hard_limits("triple") == {"zoneid": 1}
        assert coordinators.hard_limits("three_data_hall") == {"zoneid": 1, "data_hall": 3}
        assert coordinators.hard_limits("three_datacenter") == {"zoneid": 1, "dcid": 3}
        assert coordinators.hard_limits("double", 2, 4) == {"zoneid": 1, "dcid": 3}
        assert coordinators.hard_limits("double", 2, 2) == {"zoneid": 1, "dcid": 5}

    def test_class_priority(self) -> None:
        """log/transaction 1, storage 0, stateless never; a selection decides alone."""
        assert [coordinators.class_priority(c, None) for c in ("log", "transaction", "storage", "stateless")] == \
            [1, 1, 0, None]
        assert coordinators.class_priority("storage", {"storage": 7}) == 7
        assert coordinators.class_priority("log", {"storage": 7}) is None


class TestThreeDataHall:
    """Nine coordinators over three halls."""

    def test_three_per_hall_all_storage_distinct_zones(self) -> None:
        """3 × (8 storage + 4 log), storage preferred: 9 storage, 3 per hall, 9 zones, halls balanced at every prefix."""
        result = coordinators.plan(cluster("three_data_hall", halls(), selection=STORAGE_FIRST), [])
        chosen = result.coordinators
        assert len(chosen) == 9 and result.ok and {c.process_class for c in chosen} == {"storage"}
        assert result.distribution("data_hall") == {"A": 3, "B": 3, "C": 3}
        assert len({c.localities["locality_zoneid"] for c in chosen}) == 9
        assert {c.localities["locality_data_hall"] for c in chosen[:3]} == {"A", "B", "C"}
        assert "6 of 9" in next(f.message for f in result.findings if f.rule == "coordinator-survival")

    def test_default_priority_prefers_logs(self) -> None:
        """Without coordinatorSelection logs (priority 1) win, still three per hall."""
        result = coordinators.plan(cluster("three_data_hall", halls()), [])
        assert {c.process_class for c in result.coordinators} == {"log"}
        assert result.distribution("data_hall") == {"A": 3, "B": 3, "C": 3}

    def test_repeated_and_shuffled_selection_never_churns(self) -> None:
        """The same processes in any order give the same coordinators, in the same order."""
        processes = halls()
        first = [c.id for c in coordinators.plan(cluster("three_data_hall", processes), []).coordinators]
        for seed in range(3):
            shuffled = processes[:]
            random.Random(seed).shuffle(shuffled)
            assert [c.id for c in coordinators.plan(cluster("three_data_hall", shuffled), []).coordinators] == first

    def test_two_zones_in_a_hall_is_not_enough(self) -> None:
        """Hall B with 2 zones: an error saying 3 distinct zoneids per hall are needed, naming the hall."""
        processes = [p for p in halls(zones_per_hall=3) if not p["id"].startswith("B")]
        processes += [p for p in halls(zones_per_hall=2) if p["id"].startswith("B")]
        result = coordinators.plan(cluster("three_data_hall", processes), [])
        finding = next(f for f in result.findings if f.rule == "zones-per-split")
        assert finding.severity is findings.Severity.ERROR and not result.ok
        assert "at least 3 distinct zoneid values in each of the 3 data_hall" in finding.message
        assert "data_hall 'B' has 2" in finding.message and "'A'" not in finding.message
        assert len(result.coordinators) == 8 and "not-enough-coordinators" not in rules(result.findings)

    def test_two_zones_in_a_hall_without_hard_limits(self) -> None:
        """The same cluster as a what-if without hard limits: 9 chosen, warnings instead of errors."""
        processes = [p for p in halls(zones_per_hall=3) if not p["id"].startswith("B")]
        processes += [p for p in halls(zones_per_hall=2) if p["id"].startswith("B")]
        result = coordinators.plan(cluster("three_data_hall", processes), [], enforce_hard_limits=False)
        assert result.ok and len(result.coordinators) == 9
        assert {"zones-per-split", "coordinators-share-zone"} <= set(rules(result.findings))

    def test_exactly_three_halls(self) -> None:
        """Two halls: an error counting them."""
        processes = [p for p in halls() if not p["id"].startswith("C")]
        result = coordinators.plan(cluster("three_data_hall", processes), [])
        assert "data_hall-count" in rules(result.findings) and "found 2" in result.findings[0].message

    def test_missing_hall_locality_names_process_and_key(self) -> None:
        """A candidate without FDB_HALL: an error whose subject is the process and message the locality key."""
        processes = halls()
        del processes[0]["env"]["FDB_HALL"]
        result = coordinators.plan(cluster("three_data_hall", processes), [])
        finding = next(f for f in result.findings if f.rule == "locality-missing")
        assert finding.subject == "A-storage-0" and "locality_data_hall" in finding.message
        assert "env var 'FDB_HALL' is not set" in finding.message

    def test_required_locality_must_be_declared(self) -> None:
        """three_data_hall without a data_hall locality is refused before anything else."""
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            coordinators.plan(cluster("three_data_hall", halls(), localities=[{"key": "zoneid", "envValue": "Z"}]),
                              [])
        assert rules(caught.value.findings) == ["locality-required"]

    def test_fixture_with_node_labels(self) -> None:
        """The fixture: hall = zone label, zoneid = node; 3 storage coordinators per zone on 9 distinct nodes."""
        manifest = yaml.safe_load((PLANS / "fdb-three-data-hall.yaml").read_text())
        nodes = yaml.safe_load((PLANS / "nodes-3zones.yaml").read_text())["items"]
        result = coordinators.plan(manifest, nodes)
        assert result.ok and result.distribution("data_hall") == {"eastus-1": 3, "eastus-2": 3, "eastus-3": 3}
        assert len({c.node for c in result.coordinators}) == 9


class TestOtherModes:
    """Flat zones, fewer zones than needed, multi-DC, three_datacenter."""

    def test_flat_zones(self) -> None:
        """double: 3 coordinators in 3 distinct zones, logs first."""
        processes = [proc(f"p{i}", "storage" if i < 6 else "log", FDB_ZONE=f"z{i}") for i in range(9)]
        result = coordinators.plan(cluster("double", processes), [])
        assert [c.id for c in result.coordinators] == ["p6", "p7", "p8"]

    def test_fewer_zones_than_needed_with_hard_limits(self) -> None:
        """triple with zoneid = AZ (3 zones): only 3 of 5, FoundationDB's error text included (#2185)."""
        processes = [proc(f"p{i}", "storage", FDB_ZONE=f"az{i % 3}") for i in range(9)]
        result = coordinators.plan(cluster("triple", processes), [])
        finding = next(f for f in result.findings if f.rule == "not-enough-coordinators")
        assert "Could only select 3 processes, but 5 are required" in finding.message
        assert [c.id for c in result.coordinators] == ["p0", "p1", "p2"] and not result.ok

    def test_fewer_zones_than_needed_without_hard_limits(self) -> None:
        """The same as a what-if: 5 chosen, at most 2 per zone, and a warning that FDB would refuse."""
        processes = [proc(f"p{i}", "storage", FDB_ZONE=f"az{i % 3}") for i in range(9)]
        result = coordinators.plan(cluster("triple", processes), [], enforce_hard_limits=False)
        zones = Counter(c.localities["locality_zoneid"] for c in result.coordinators)
        assert len(result.coordinators) == 5 and sorted(zones.values()) == [1, 2, 2] and result.ok
        assert "coordinators-share-zone" in rules(result.findings)

    def test_multi_dc(self) -> None:
        """2 regions: primary and remote 8 storage + 4 log, satellite 4 log → 3 per DC, 6 storage + 3 log."""
        processes = [proc(f"{dc}-{cls}-{i}", cls, FDB_ZONE=f"{dc}-{cls}-{i}", FDB_DC=dc)
                     for dc, counts in (("primary", (8, 4)), ("remote", (8, 4)), ("satellite", (0, 4)))
                     for cls, n in zip(("storage", "log"), counts, strict=True) for i in range(n)]
        result = coordinators.plan(cluster("double", processes, regions=2, selection=STORAGE_FIRST), [])
        classes = Counter(c.process_class for c in result.coordinators)
        assert result.distribution("dcid") == {"primary": 3, "remote": 3, "satellite": 3}
        assert classes == {"storage": 6, "log": 3} and result.hard_limits == {"zoneid": 1, "dcid": 3}

    @pytest.mark.parametrize("with_regions", [True, False])
    def test_multi_region_limit_counts_configured_datacenters(self, with_regions: bool) -> None:
        """Primary, satellite and remote with every primary process excluded: dcid stays 3, so 9 cannot be chosen."""
        processes = [{**proc(f"{dc}-{cls}-{i}", cls, FDB_ZONE=f"{dc}-{cls}-{i}", FDB_DC=dc), "excluded": dc == "primary"}
                     for dc, counts in (("primary", (8, 4)), ("remote", (8, 4)), ("satellite", (0, 4)))
                     for cls, n in zip(("storage", "log"), counts, strict=True) for i in range(n)]
        manifest = cluster("double", processes, regions=2, selection=STORAGE_FIRST)
        if with_regions:
            manifest["spec"]["databaseConfiguration"]["regions"] = [
                {"datacenters": [{"id": "primary", "priority": 1}, {"id": "satellite", "satellite": 1, "priority": 1}]},
                {"datacenters": [{"id": "remote", "priority": 0}]}]
        result = coordinators.plan(manifest, [])
        assert result.hard_limits == {"zoneid": 1, "dcid": 3}
        assert result.distribution("dcid") == {"remote": 3, "satellite": 3} and not result.ok
        assert "not-enough-coordinators" in rules(result.findings)

    def test_region_datacenter_without_id_is_refused(self) -> None:
        """A regions[].datacenters[] entry without an id is a malformed spec."""
        manifest = cluster("double", [proc("p", "storage", FDB_ZONE="z", FDB_DC="d")], regions=2)
        manifest["spec"]["databaseConfiguration"]["regions"] = [{"datacenters": [{"priority": 1}]}]
        with pytest.raises(errors.InvalidWorkloadSpec, match="datacenters\\[0\\].id"):
            coordinators.plan(manifest, [])

    def test_three_datacenter(self) -> None:
        """three_datacenter: dcid splits 3/3/3, with a note that the operator's CRD lacks the mode."""
        processes = [proc(f"{dc}-{i}", "storage", FDB_ZONE=f"{dc}-{i}", FDB_DC=dc) for dc in "xyz" for i in range(4)]
        result = coordinators.plan(cluster("three_datacenter", processes), [])
        assert result.distribution("dcid") == {"x": 3, "y": 3, "z": 3}
        assert "three-datacenter" in rules(result.findings)

    def test_unknown_redundancy_mode_lists_valid_ones(self) -> None:
        """A typo in redundancy_mode is refused with the valid modes."""
        with pytest.raises(errors.InvalidWorkloadSpec, match="three_data_hall"):
            coordinators.plan(cluster("tripple", []), [])

    def test_excluded_and_outdated_processes(self) -> None:
        """Excluded processes are never chosen; a process on another version only as a last resort."""
        processes = [proc(f"p{i}", "storage", FDB_ZONE=f"z{i}") for i in range(4)]
        processes[0]["excluded"] = True
        processes[1]["version"] = "7.1.55"
        ids = [c.id for c in coordinators.plan(cluster("double", processes), []).coordinators]
        assert ids == ["p2", "p3", "p1"]


class TestLocalities:
    """Precedence value > envValue > topologyKey, and the generated stanzas."""

    def test_precedence(self) -> None:
        """A static value beats the env var, which beats the node label; the label is the fallback."""
        specs = fdblocality.parse_localities([{"key": "a", "value": "static", "envValue": "A", "topologyKey": ZONE},
                                              {"key": "locality_b", "envValue": "B", "topologyKey": ZONE},
                                              {"key": "c", "envValue": "C", "topologyKey": ZONE}], "fdb")
        process = fdblocality.Process("p", "storage", "n1", {"A": "env-a", "B": "env-b"})
        values, problems = fdblocality.resolve(process, specs, {"n1": {ZONE: "eastus-1"}})
        assert values == {"a": "static", "b": "env-b", "c": "eastus-1"} and problems == []
        assert fdblocality.prefixed(values) == {"locality_a": "static", "locality_b": "env-b", "locality_c": "eastus-1"}

    def test_unresolvable_locality_says_why(self) -> None:
        """No env var and a node without the label: both reasons are given."""
        specs = fdblocality.parse_localities([{"key": "data_hall", "envValue": "H", "topologyKey": ZONE}], "fdb")
        _, problems = fdblocality.resolve(fdblocality.Process("p", "log", "n1"), specs, {"n1": {}})
        assert problems[0].subject == "p" and "env var 'H' is not set and node 'n1' has no label" in problems[0].message

    @pytest.mark.parametrize(("entry", "rule"), [({"value": "x"}, "locality-key"), ({"key": "zoneid"}, "locality-source")])
    def test_malformed_entries(self, entry: dict[str, Any], rule: str) -> None:
        """An entry without key, or without any source, is refused."""
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            fdblocality.parse_localities([entry], "fdb")
        assert rules(caught.value.findings) == [rule]

    def test_process_counts_are_placed_and_zoneid_defaults_to_hostname(self) -> None:
        """Without processes, processCounts pods spread by the stanzas; zoneid falls back to the node name."""
        manifest = cluster("double", None, localities=[], processCounts={"storage": 3})
        result = coordinators.plan(manifest, zoned_nodes(3, 1))
        assert sorted(n for _, _, n in result.processes) == ["n10", "n20", "n30"]
        assert "default-zoneid" in rules(result.findings) and len(result.coordinators) == 3
        assert result.coordinators[0].localities["locality_zoneid"] == result.coordinators[0].node
        stanza = result.stanzas["storage"]
        assert stanza["topologySpreadConstraints"][0]["topologyKey"] == HOSTNAME
        assert stanza["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 1

    def test_stanzas_per_locality_topology_key(self) -> None:
        """One spread constraint per distinct topologyKey, selecting the cluster's pods of that class."""
        specs = [fdblocality.LocalitySpec("zoneid", topology_key=HOSTNAME),
                 fdblocality.LocalitySpec("data_hall", topology_key=ZONE),
                 fdblocality.LocalitySpec("dcid", topology_key=ZONE)]
        stanza = coordinators.pod_stanzas("fdb", "log", specs)
        assert [c["topologyKey"] for c in stanza["topologySpreadConstraints"]] == [HOSTNAME, ZONE]
        assert stanza["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": {
            "foundationdb.org/fdb-cluster-name": "fdb", "foundationdb.org/fdb-process-class": "log"}}

    def test_unplaceable_process_counts(self) -> None:
        """Process pods that fit nowhere (no node has the zone label) are an error."""
        manifest = cluster("double", None, localities=[{"key": "zoneid", "topologyKey": ZONE}],
                           processCounts={"storage": 3})
        result = coordinators.plan(manifest, [node("bare", None)])
        assert "processes-unplaceable" in rules(result.findings)


class TestHostileCounts:
    """processCounts and redundancy_mode that are wrong but well-typed are refused with their value."""

    @pytest.mark.parametrize(("counts", "message"), [
        ({"storage": -1}, "at least 0, got -1"),
        ({"storage": 10**30}, "more than the 100,000 this planner accepts"),
        ({"storage": "x"}, "at least 0, got 'x'"),
    ])
    def test_process_counts(self, counts: dict[str, Any], message: str) -> None:
        """Negative, huge and non-numeric counts: InvalidWorkloadSpec naming the field."""
        with pytest.raises(errors.InvalidWorkloadSpec, match="spec.processCounts.storage") as caught:
            coordinators.plan(cluster("double", None, processCounts=counts), zoned_nodes(3))
        assert message in str(caught.value)

    @pytest.mark.parametrize("mode", [[], {}, 3])
    def test_redundancy_mode_not_a_string(self, mode: Any) -> None:
        """redundancy_mode: [] no longer silently becomes double."""
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            coordinators.plan(cluster(mode, None, processCounts={"storage": 3}), zoned_nodes(3))
        assert rules(caught.value.findings) == ["redundancy-mode"]
