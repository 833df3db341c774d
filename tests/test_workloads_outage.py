"""Tests for the zone-outage what-if: quorum per workload, pods stranded by zonal PVs, FDB coordinators."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml
from workload_helpers import node, rules

from cloudzones import errors
from cloudzones.workloads import outage

PLANS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "plans"


@pytest.fixture(scope="module")
def snapshot() -> dict[str, list[Any]]:
    """The three-zone fixture snapshot, sorted by kind."""
    return outage.snapshot_from_documents([yaml.safe_load((PLANS / "snapshot-3zones.yaml").read_text())])


def pod(name: str, node_name: str, *, owner: str | None = "StatefulSet/db", rf: str | None = None,
        **extra: Any) -> dict[str, Any]:
    """A running pod owned by ``Kind/name``."""
    metadata: dict[str, Any] = {"name": name, "namespace": "ns"}
    if owner:
        kind, owner_name = owner.split("/")
        metadata["ownerReferences"] = [{"kind": kind, "name": owner_name, "controller": True}]
    if rf:
        metadata["annotations"] = {outage.REPLICATION_FACTOR_ANNOTATION: rf}
    return {"metadata": metadata, "spec": {"nodeName": node_name, **extra}, "status": {"phase": "Running"}}


NODES = [node("a", "z1"), node("b", "z2"), node("c", "z3")]


class TestFixtureSnapshot:
    """Losing eastus-1 in the fixture cluster."""

    def test_workloads(self, snapshot: dict[str, list[Any]]) -> None:
        """ZooKeeper (2 of 3 in the zone) loses quorum; etcd and the zone-aware ingesters keep it; web is down."""
        report = outage.report(snapshot, "eastus-1")
        status = {w.workload: w.status for w in report.workloads}
        assert status["StatefulSet/infra/zk"] == "quorum-lost"
        assert status["StatefulSet/infra/etcd"] == "degraded"
        assert status["StatefulSet/loki/logs-ingester"] == "degraded"
        assert status["ReplicaSet/app/web-6d4cf56db6"] == "unavailable"
        assert status["ReplicaSet/app/api-7f9b8c6d5"] == "degraded"
        assert not any("kube-proxy" in w for w in status)
        assert report.nodes_lost == ("aks-pool1-0", "aks-pool1-1") and not report.ok

    def test_pods_stranded_by_zonal_volumes(self, snapshot: dict[str, list[Any]]) -> None:
        """postgres-0 and etcd-0 have disks in eastus-1; the ingester's ZRS disk strands nothing."""
        report = outage.report(snapshot, "eastus-1")
        assert [(p.pod, p.volumes) for p in report.unschedulable] == [
            ("app/postgres-0", ("pvc-postgres-0",)), ("infra/etcd-0", ("pvc-etcd-0",))]
        assert "topology.kubernetes.io/zone In ['eastus-1']" in report.unschedulable[0].reason

    def test_coordinators_by_ip_and_dns(self, snapshot: dict[str, list[Any]]) -> None:
        """fdb loses 2 of 3 coordinators (by IP); fdb2 loses 1 of 3 (by DNS name) and survives."""
        report = outage.report(snapshot, "eastus-1")
        by_cluster = {c.cluster: c for c in report.coordinators}
        assert by_cluster["db/fdb"].lost == ("10.244.1.101 (fdb-storage-1)", "10.244.1.102 (fdb-log-1)")
        assert not by_cluster["db/fdb"].survives and by_cluster["db/fdb2"].survives
        assert len(by_cluster["db/fdb2"].lost) == 1 and by_cluster["db/fdb2"].unknown == ()
        assert rules(report.findings).count("coordinators-lost") == 1

    def test_another_zone(self, snapshot: dict[str, list[Any]]) -> None:
        """Losing eastus-3: no quorum lost, fdb untouched, fdb2 down one coordinator, only etcd-2 stranded."""
        report = outage.report(snapshot, "eastus-3")
        assert "quorum-lost" not in rules(report.findings)
        assert [p.pod for p in report.unschedulable] == ["infra/etcd-2"]
        assert [(c.cluster, len(c.lost), c.survives) for c in report.coordinators] == [
            ("db/fdb", 0, True), ("db/fdb2", 1, True)]
        assert [f.rule for f in report.findings if f.severity.value == "error"] == ["volume-pinned"]

    def test_unknown_zone_lists_the_zones(self, snapshot: dict[str, list[Any]]) -> None:
        """A zone no node is in is refused with the snapshot's zones."""
        with pytest.raises(errors.InvalidWorkloadSpec, match="'eastus-1', 'eastus-2', 'eastus-3'"):
            outage.report(snapshot, "eastus-4")


class TestRules:
    """Quorum models and snapshot parsing on small inputs."""

    def test_zone_aware_store_with_factor_two_loses_writes(self) -> None:
        """Replication factor 2 over 3 zones: a key keeps 1 of 2 replicas, writes need 2."""
        snap = {"nodes": NODES, "pods": [pod(f"i{i}", n, rf="2") for i, n in enumerate("abc")]}
        (impact,) = outage.report(snap, "z1").workloads
        assert (impact.status, impact.replication_factor, impact.quorum, impact.survivors) == ("quorum-lost", 2, 2, 1)

    def test_member_quorum_and_single_replica(self) -> None:
        """Five members with two lost keep quorum; a one-pod StatefulSet in the zone is unavailable (a warning)."""
        nodes = [*NODES, node("a2", "z1")]
        pods = [pod(f"m{i}", n) for i, n in enumerate(["a", "a2", "b", "c", "c"])]
        pods.append(pod("solo-0", "a", owner="StatefulSet/solo"))
        report = outage.report({"nodes": nodes, "pods": pods}, "z1")
        status = {w.workload: (w.status, w.survivors, w.quorum) for w in report.workloads}
        assert status == {"StatefulSet/ns/db": ("degraded", 3, 3), "StatefulSet/ns/solo": ("unavailable", 0, 1)}
        assert report.ok

    def test_pending_terminating_and_finished_pods_are_ignored(self) -> None:
        """Only bound, running, not terminating pods count."""
        finished = pod("done", "a")
        finished["status"]["phase"] = "Succeeded"
        terminating = pod("bye", "a")
        terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        snap = {"nodes": NODES, "pods": [finished, terminating, pod("pending", ""), pod("x", "b")]}
        assert outage.report(snap, "z1").pods_lost == ()

    def test_label_groups(self) -> None:
        """Ownerless pods group by the app.kubernetes.io labels, then by app."""
        labelled = pod("l1", "a", owner=None)
        labelled["metadata"]["labels"] = {"app.kubernetes.io/name": "kafka", "app.kubernetes.io/instance": "k1"}
        plain = pod("p1", "a", owner=None)
        plain["metadata"]["labels"] = {"app": "redis"}
        report = outage.report({"nodes": NODES, "pods": [labelled, plain]}, "z1")
        assert [w.workload for w in report.workloads] == ["label:ns/k1/kafka", "label:ns/redis"]

    def test_unmatched_coordinator_is_assumed_alive(self) -> None:
        """An address matching no pod is reported and counted as surviving."""
        cluster = {"kind": "FoundationDBCluster", "metadata": {"name": "f", "namespace": "db"},
                   "status": {"connectionString": "f:x@10.0.0.1:4501,10.0.0.2:4501,10.0.0.3:4501"}}
        pods = [pod("f1", "a", owner=None, hostNetwork=False) | {"status": {"phase": "Running", "podIP": "10.0.0.1"}}]
        report = outage.report({"nodes": NODES, "pods": pods, "foundationDBClusters": [cluster]}, "z1")
        (impact,) = report.coordinators
        assert impact.unknown == ("10.0.0.2", "10.0.0.3") and impact.survives
        assert {"coordinator-unknown", "coordinators-degraded"} <= set(rules(report.findings))

    @pytest.mark.parametrize(("text", "hosts"), [
        ("d:id@10.1.0.5:4500,10.1.0.6:4500:tls", ["10.1.0.5", "10.1.0.6"]),
        ("d:id@[fd00::1]:4500:tls,[fd00::2]:4500", ["fd00::1", "fd00::2"]),
        ("no-at-sign", [])])
    def test_connection_string(self, text: str, hosts: list[str]) -> None:
        """Hosts from desc:id@addr,...: ports, :tls and IPv6 brackets dropped."""
        assert outage.parse_connection_string(text) == hosts

    def test_snapshot_documents(self) -> None:
        """Lists, loose manifests and the mapping form all sort into the snapshot keys; other kinds are refused."""
        mapping = outage.snapshot_from_documents([{"nodes": NODES, "pods": []}])
        listed = outage.snapshot_from_documents([{"kind": "List", "items": NODES}, {"kind": "Pod", "metadata": {}}])
        assert len(mapping["nodes"]) == 3 and len(listed["nodes"]) == 3 and len(listed["pods"]) == 1
        with pytest.raises(errors.InvalidWorkloadSpec, match="'ConfigMap'"):
            outage.snapshot_from_documents([{"kind": "ConfigMap"}])

    def test_pv_without_affinity_or_claim_strands_nothing(self) -> None:
        """A network volume (no nodeAffinity) and an unknown claim do not strand the pod."""
        lost = pod("p", "a", volumes=[{"persistentVolumeClaim": {"claimName": "c"}},
                                      {"persistentVolumeClaim": {"claimName": "missing"}}])
        snap = {"nodes": NODES, "pods": [lost],
                "persistentVolumeClaims": [{"metadata": {"name": "c", "namespace": "ns"}, "spec": {"volumeName": "pv"}}],
                "persistentVolumes": [{"metadata": {"name": "pv"}, "spec": {"nfs": {"server": "x"}}}]}
        assert outage.report(snap, "z1").unschedulable == ()


class TestDesiredMembership:
    """Quorum against the desired members: those already down count as lost; one verdict per FDB cluster."""

    def test_pending_members_count_as_lost(self) -> None:
        """Five members, two Pending: losing one more leaves 2 of 5, no majority."""
        pods = [pod("db-0", "a"), pod("db-1", "b"), pod("db-2", "c"), pod("db-3", ""), pod("db-4", "")]
        (impact,) = outage.report({"nodes": NODES, "pods": pods}, "z1").workloads
        assert (impact.status, impact.pods, impact.survivors, impact.quorum) == ("quorum-lost", 5, 2, 3)

    def test_statefulset_replicas_give_the_membership(self) -> None:
        """spec.replicas 5 with only three pods present: the two missing members are down."""
        sts = {"kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {"replicas": 5}}
        members = [{"kind": "Pod", **pod(f"db-{i}", n)} for i, n in enumerate("abc")]
        snap = outage.snapshot_from_documents([{"kind": "List", "items": [*NODES, sts, *members]}])
        report = outage.report(snap, "z1")
        (impact,) = report.workloads
        assert (impact.status, impact.pods, impact.survivors) == ("quorum-lost", 5, 2) and not report.ok
        assert "(2 already down)" in report.findings[0].message

    def test_missing_ordinals_are_members(self) -> None:
        """Without the StatefulSet, db-4 present means five members even if db-3 is gone."""
        pods = [pod("db-0", "a"), pod("db-1", "b"), pod("db-2", "c"), pod("db-4", "b")]
        (impact,) = outage.report({"nodes": NODES, "pods": pods}, "z1").workloads
        assert (impact.pods, impact.survivors, impact.status) == (5, 3, "degraded")

    def test_member_on_not_ready_node_is_down(self) -> None:
        """A member whose node is NotReady serves nothing: 3 members, one down, losing one more loses quorum."""
        sick = node("b", "z2") | {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
        pods = [pod("db-0", "a"), pod("db-1", "b"), pod("db-2", "c")]
        (impact,) = outage.report({"nodes": [NODES[0], sick, NODES[2]], "pods": pods}, "z1").workloads
        assert (impact.status, impact.survivors, impact.quorum) == ("quorum-lost", 1, 2)

    def test_zone_aware_store_with_a_member_down(self) -> None:
        """rf 3 over 3 zones with z2's ingester Pending-bound: a key may keep 1 of 3, writes need 2."""
        down = pod("i1", "b", rf="3")
        down["status"]["phase"] = "Pending"
        pods = [pod("i0", "a", rf="3"), down, pod("i2", "c", rf="3")]
        (impact,) = outage.report({"nodes": NODES, "pods": pods}, "z1").workloads
        assert (impact.status, impact.survivors, impact.quorum) == ("quorum-lost", 1, 2)
        healthy = [pod("i0", "a", rf="3"), pod("i1", "b", rf="3"), pod("i2", "c", rf="3")]
        assert outage.report({"nodes": NODES, "pods": healthy}, "z1").workloads[0].status == "degraded"

    def test_fdb_workload_agrees_with_its_coordinators(self, snapshot: dict[str, list[Any]]) -> None:
        """fdb loses its coordinator majority: its workload row says quorum-lost, never 'still serving'."""
        report = outage.report(snapshot, "eastus-1")
        rows = {w.workload: w for w in report.workloads}
        assert (rows["FoundationDBCluster/db/fdb"].status, rows["FoundationDBCluster/db/fdb"].quorum) == \
            ("quorum-lost", 2)
        assert rows["FoundationDBCluster/db/fdb2"].status == "degraded"
        about_fdb = [(x.rule, x.severity.value) for x in report.findings if x.subject.endswith("db/fdb")]
        assert about_fdb == [("coordinators-lost", "error")]

    def test_fdb_pods_by_label_join_their_cluster(self) -> None:
        """Ownerless pods labelled with the cluster name are that cluster's workload."""
        cluster = {"kind": "FoundationDBCluster", "metadata": {"name": "f", "namespace": "ns"},
                   "status": {"connectionString": "f:x@p0:4501,p1:4501,p2:4501"}}
        pods = [pod(f"p{i}", n, owner=None) for i, n in enumerate("aab")]
        for item in pods:
            item["metadata"]["labels"] = {outage.FDB_CLUSTER_LABEL: "f"}
        report = outage.report({"nodes": NODES, "pods": pods, "foundationDBClusters": [cluster]}, "z1")
        assert [(w.workload, w.status) for w in report.workloads] == [("FoundationDBCluster/ns/f", "quorum-lost")]
        assert not report.coordinators[0].survives

    def test_bad_statefulset_replicas_is_refused(self) -> None:
        """A StatefulSet whose spec.replicas is not a count is a malformed snapshot."""
        sts = {"kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {"replicas": "many"}}
        with pytest.raises(errors.InvalidWorkloadSpec, match="spec.replicas"):
            outage.report({"nodes": NODES, "pods": [pod("db-0", "a")], "statefulSets": [sts]}, "z1")


class TestHostileSnapshot:
    """Found by the hostile-files campaign."""

    def test_kind_that_is_not_a_string(self) -> None:
        """A kind that is a list is an unexpected manifest, not a TypeError."""
        with pytest.raises(errors.InvalidWorkloadSpec, match="unexpected manifest kind"):
            outage.snapshot_from_documents([{"kind": "Node", "items": [{"kind": []}]}])
