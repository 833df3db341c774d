"""Tests for Longhorn data locality: mode resolution and the one-step reconcile plan."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml
from workload_helpers import rules

from cloudzones import errors
from cloudzones.workloads import findings, locality

PLANS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "plans"
GIB = 2**30


def lh_node(name: str, zone: str, disks: dict[str, dict[str, Any]] | None = None, *, ready: bool = True,
            allow: bool = True, tags: tuple[str, ...] = ()) -> dict[str, Any]:
    """A Longhorn Node; each disk ``{max, available, scheduled, tags, schedulable, allow}`` in GiB."""
    disks = {"d1": {}} if disks is None else disks
    spec_disks, status_disks = {}, {}
    for disk, o in disks.items():
        spec_disks[disk] = {"allowScheduling": o.get("allow", True), "storageReserved": 0, "tags": o.get("tags", ["ssd"]),
                            "evictionRequested": o.get("evict", False)}
        status_disks[disk] = {"storageMaximum": str(o.get("max", 100) * GIB),
                              "storageAvailable": str(o.get("available", 80) * GIB),
                              "storageScheduled": str(o.get("scheduled", 20) * GIB),
                              "conditions": [{"type": "Schedulable",
                                              "status": "True" if o.get("schedulable", True) else "False"}]}
    return {"kind": "Node", "metadata": {"name": name},
            "spec": {"allowScheduling": allow, "tags": list(tags), "disks": spec_disks},
            "status": {"zone": zone, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "diskStatus": status_disks}}


def volume(mode: str | None = "best-effort", engine: str = "E", *, replicas: int = 2, size_gib: int = 10,
           existing: bool = True, **spec: Any) -> dict[str, Any]:
    """A Longhorn Volume named ``v`` attached to ``engine``; ``existing=False`` leaves out the status."""
    body: dict[str, Any] = {"numberOfReplicas": replicas, "size": str(size_gib * GIB), **spec}
    if mode is not None:
        body["dataLocality"] = mode
    manifest: dict[str, Any] = {"kind": "Volume", "metadata": {"name": "v"}, "spec": body}
    if existing:
        manifest["status"] = {"currentNodeID": engine, "state": "attached" if engine else "detached"}
    return manifest


def rep(name: str, node: str, disk: str = "d1", *, healthy: bool = True) -> dict[str, Any]:
    """A replica of volume ``v``."""
    return {"kind": "Replica", "metadata": {"name": name},
            "spec": {"volumeName": "v", "nodeID": node, "diskID": disk, "healthyAt": "2026-01-01T00:00:00Z",
                     "failedAt": "" if healthy else "2026-01-02T00:00:00Z"}}


NODES = [lh_node("E", "Z1"), lh_node("N1", "Z2"), lh_node("N2", "Z3"), lh_node("N3", "Z1")]


def plan_one(vol: dict[str, Any], replicas: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None,
             **kw: Any) -> locality.VolumePlan:
    """The plan of the single volume."""
    (result,) = locality.plan([vol], replicas, NODES if nodes is None else nodes, **kw).volumes
    return result


class TestMode:
    """volume > StorageClass dataLocality > global default; legacy volumes are disabled."""

    def test_volume_field_wins(self) -> None:
        """The volume's own value beats the StorageClass and the default."""
        sc = {"parameters": {"dataLocality": "disabled"}}
        assert locality.resolve_mode(volume("best-effort"), storage_class=sc, default="strict-local") == \
            ("best-effort", "volume")

    def test_new_volume_takes_storage_class_then_default(self) -> None:
        """A volume being created (no status) without the field: StorageClass, else the global default."""
        new = volume(None, existing=False)
        assert locality.resolve_mode(new, storage_class={"parameters": {"dataLocality": "best-effort"}},
                                     default="disabled") == ("best-effort", "storageClass")
        assert locality.resolve_mode(new, storage_class={"parameters": {}}, default="strict-local") == \
            ("strict-local", "default")
        assert locality.resolve_mode(new) == ("disabled", "default")

    def test_legacy_volume_without_field_is_disabled(self) -> None:
        """An existing volume without dataLocality predates the feature: disabled, whatever the defaults say."""
        sc = {"parameters": {"dataLocality": "best-effort"}}
        assert locality.resolve_mode(volume(None), storage_class=sc, default="best-effort") == ("disabled", "legacy")
        assert locality.resolve_mode(volume("")) == ("disabled", "volume")

    @pytest.mark.parametrize(("vol", "sc", "default", "where"), [
        (volume("local"), None, "disabled", "spec.dataLocality"),
        (volume(None, existing=False), {"parameters": {"dataLocality": "BestEffort"}}, "disabled", "StorageClass"),
        (volume(None, existing=False), None, "sometimes", "default-data-locality")])
    def test_unknown_mode_lists_valid_ones(self, vol: dict[str, Any], sc: dict[str, Any] | None, default: str,
                                           where: str) -> None:
        """Wherever the bad value comes from, the error says where and lists the valid modes."""
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            locality.resolve_mode(vol, storage_class=sc, default=default)
        assert rules(caught.value.findings) == ["unknown-data-locality"]
        assert where in str(caught.value) and "disabled, best-effort, strict-local" in str(caught.value)

    def test_unknown_mode_in_a_plan_is_an_error_finding(self) -> None:
        """The plan keeps going for other volumes; this one carries the error."""
        result = plan_one(volume("nearby"), [])
        assert rules(result.findings) == ["unknown-data-locality"] and result.action == "none"
        assert "'nearby'" in result.reason


class TestInput:
    """Malformed volumes do not stop the plan."""

    def test_malformed_volume_is_a_finding(self) -> None:
        """A volume whose spec is not a mapping gets an error finding; the other volumes are still planned."""
        bad = {"metadata": {"name": "broken"}, "spec": "oops"}
        result = locality.plan([bad, volume()], [rep("a", "E")], NODES)
        assert [v.volume for v in result.volumes] == ["broken", "v"] and rules(result.findings) == ["not-a-mapping"]


class TestStrictLocal:
    """strict-local needs exactly one replica, on the attached node."""

    def test_requires_exactly_one_replica(self) -> None:
        """numberOfReplicas 3 with strict-local is an error; 1 is fine."""
        bad = plan_one(volume("strict-local", replicas=3), [rep("a", "E")])
        assert rules(bad.findings) == ["strict-local-replicas"] and "asks for 3" in bad.findings[0].message
        assert plan_one(volume("strict-local", replicas=1), [rep("a", "E")]).findings == ()

    def test_moved_volume(self) -> None:
        """Attached elsewhere than its replica: Longhorn refuses to move it."""
        result = plan_one(volume("strict-local", replicas=1), [rep("a", "N1")])
        assert rules(result.findings) == ["strict-local-moved"]


class TestBestEffort:
    """The reconcile step of best-effort locality."""

    def test_disabled_and_detached_do_nothing(self) -> None:
        """disabled → nothing even with extra replicas; a detached best-effort volume → nothing."""
        extra = [rep("a", "E"), rep("b", "N1"), rep("c", "N1")]
        assert plan_one(volume("disabled"), extra).action == "none"
        assert plan_one(volume("best-effort", engine=""), extra).action == "none"

    def test_local_replica_kept(self) -> None:
        """A healthy local replica and no extra: nothing to do, the local one is kept."""
        result = plan_one(volume(), [rep("a", "E"), rep("b", "N1")])
        assert result.action == "none" and "'a' is kept" in result.reason

    def test_adds_local_replica_then_removes_one(self) -> None:
        """No local replica and a fitting disk: add one on E; the next step removes by zone group (E, N3 share Z1)."""
        result = plan_one(volume(), [rep("x", "N3"), rep("y", "N1")])
        assert (result.action, result.node, result.disk) == ("add-replica", "E", "d1")
        assert result.then_remove == "x"

    def test_failed_replicas_are_not_healthy(self) -> None:
        """A failed replica elsewhere is not among the healthy ones, and no replica is local: add one."""
        result = plan_one(volume(), [rep("a", "N3", healthy=False), rep("b", "N1"), rep("c", "N2")])
        assert result.action == "add-replica" and result.healthy == ("b", "c")

    @pytest.mark.parametrize("state", ["rebuilding", "failed"])
    def test_replica_on_engine_node_is_local_whatever_its_state(self, state: str) -> None:
        """A rebuilding or failed replica on the engine's node is local (hasLocalReplicaOnSameNodeAsEngine)."""
        local = rep("a", "E", healthy=state != "failed")
        if state == "rebuilding":
            local["spec"]["healthyAt"] = ""
        result = plan_one(volume(), [local, rep("b", "N1"), rep("c", "N2")])
        assert result.action == "none" and result.healthy == ("b", "c")
        assert "'a' is on the attached node 'E'" in result.reason

    def test_pending_replica_with_hard_affinity_is_local(self) -> None:
        """A replica not yet scheduled whose hardNodeAffinity is the engine's node counts as local."""
        pending = rep("a", "")
        pending["spec"].update(healthyAt="", hardNodeAffinity="E")
        result = plan_one(volume(), [pending, rep("b", "N1"), rep("c", "N2")])
        assert result.action == "none" and "hard node affinity" in result.reason
        other = rep("a", "")
        other["spec"].update(healthyAt="", hardNodeAffinity="N3")
        assert plan_one(volume(), [other, rep("b", "N1"), rep("c", "N2")]).action == "add-replica"

    @pytest.mark.parametrize(("disks", "node_kw", "why"), [
        ({"d1": {"available": 20}}, {}, "at or below the 25% minimum"),
        ({"d1": {"scheduled": 95}}, {}, "does not fit in 5.0 GiB"),
        ({"d1": {"tags": ["hdd"]}}, {}, "lacks tag(s) ['ssd']"),
        ({"d1": {"schedulable": False}}, {}, "not schedulable"),
        ({"d1": {"allow": False}}, {}, "scheduling disabled"),
        ({"d1": {"evict": True}}, {}, "eviction requested"),
        ({"d1": {}}, {"ready": False}, "is not Ready"),
        ({"d1": {}}, {"allow": False}, "scheduling is disabled on node"),
        ({}, {}, "has no disks")])
    def test_no_fitting_disk_says_why_and_never_fails(self, disks: dict[str, Any], node_kw: dict[str, Any],
                                                      why: str) -> None:
        """Best-effort without room on the attached node: a warning with the reason, the volume left alone."""
        nodes = [lh_node("E", "Z1", disks, **node_kw), *NODES[1:]]
        result = plan_one(volume(diskSelector=["ssd"]), [rep("b", "N1"), rep("c", "N2")], nodes)
        assert result.action == "none" and rules(result.findings) == ["no-local-disk"]
        assert result.findings[0].severity is findings.Severity.WARNING and why in result.reason
        assert locality.LocalityPlan((result,)).ok

    def test_engine_node_unknown_to_longhorn(self) -> None:
        """Attached to a node Longhorn does not manage: said so, no error."""
        result = plan_one(volume(engine="gpu-0"), [rep("b", "N1")])
        assert "'gpu-0' is not a Longhorn node" in result.reason and result.action == "none"

    def test_picks_the_roomiest_fitting_disk(self) -> None:
        """Two disks fit: the one with more schedulable room."""
        nodes = [lh_node("E", "Z1", {"d1": {"scheduled": 60}, "d2": {"scheduled": 10}}), *NODES[1:]]
        assert plan_one(volume(), [rep("b", "N1")], nodes).disk == "d2"

    @pytest.mark.parametrize(("replicas", "removed", "why"), [
        ([rep("a", "E"), rep("b", "N1"), rep("c", "N1")], "b", "shares disk"),
        ([rep("a", "E"), rep("b", "N1"), rep("c", "N1", "d2")], "b", "shares node"),
        ([rep("a", "E"), rep("b", "N3"), rep("c", "N1")], "b", "shares zone 'Z1'"),
        ([rep("a", "E"), rep("b", "N1"), rep("c", "N2")], "b", "first non-local one")])
    def test_removes_exactly_one_by_disk_node_zone_groups(self, replicas: list[dict[str, Any]], removed: str,
                                                           why: str) -> None:
        """Longhorn's derived examples: disk group, node group, zone group (local skipped), all replicas."""
        result = plan_one(volume(replicas=2), replicas)
        assert (result.action, result.remove) == ("remove-replica", removed) and why in result.reason

    def test_mode_change_takes_effect_on_the_next_reconcile(self) -> None:
        """The same volume planned again after switching disabled → best-effort gets the local replica step."""
        replicas = [rep("b", "N1"), rep("c", "N2")]
        assert plan_one(volume("disabled"), replicas).action == "none"
        assert plan_one(volume("best-effort"), replicas).action == "add-replica"

    def test_fixture(self) -> None:
        """The fixture's seven volumes get their documented outcomes."""
        data = yaml.safe_load((PLANS / "longhorn-volumes.yaml").read_text())
        result = locality.plan(data["volumes"], data["replicas"], data["nodes"], storage_class=data["storageClass"],
                               settings=data["settings"])
        outcome = {v.volume: (v.mode, v.action, v.remove or v.node) for v in result.volumes}
        assert outcome == {
            "pvc-local-kept": ("best-effort", "none", ""),
            "pvc-needs-local": ("best-effort", "add-replica", "aks-pool1-1"),
            "pvc-no-fitting-disk": ("best-effort", "none", ""),
            "pvc-extra-same-disk": ("best-effort", "remove-replica", "pvc-extra-same-disk-r-b"),
            "pvc-legacy": ("disabled", "none", ""),
            "pvc-strict-3": ("strict-local", "none", ""),
            "pvc-unknown-mode": ("", "none", "")}
        assert rules(result.findings) == ["no-local-disk", "strict-local-replicas", "unknown-data-locality"]
        assert not result.ok
