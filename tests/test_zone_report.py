"""`cloudzones report` and `kubectl zones`: the zone report from a snapshot file and from a live API server."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from cloudzones import documents, quantity
from cloudzones.cli import kubectl, main
from cloudzones.testing.kubeapi import FakeKubeApi
from cloudzones.workloads import fdblocality, outage, zonereport

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "fixtures" / "plans" / "snapshot-3zones.yaml"


def snapshot() -> dict[str, list[Any]]:
    """The three-zone snapshot fixture, sorted into keys."""
    return outage.snapshot_from_documents(list(documents.manifests(SNAPSHOT, what="snapshot")))


def node(name: str, zone: str | None, *, cpu: str = "4", memory: str = "16Gi", ready: bool = True) -> dict[str, Any]:
    """A node with capacity, in ``zone`` (None: no zone label)."""
    node_labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    return {"kind": "Node", "metadata": {"name": name, "labels": node_labels},
            "status": {"allocatable": {"cpu": cpu, "memory": memory},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name: str, node_name: str, *, owner: str = "web", cpu: str = "250m", memory: str = "128Mi") -> dict[str, Any]:
    """A running pod of ReplicaSet ``owner`` with requests."""
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "app", "ownerReferences": [
        {"kind": "ReplicaSet", "name": owner, "controller": True}]},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {
            "cpu": cpu, "memory": memory}}}]}, "status": {"phase": "Running"}}


class TestBuild:
    """The report's facts, from a snapshot."""

    def test_fixture(self) -> None:
        """Zones, pinned volumes, spread, skew and the zone-loss verdicts of the three-zone fixture."""
        report = zonereport.build(snapshot())
        assert [z.zone for z in report.zones] == ["eastus-1", "eastus-2", "eastus-3"]
        assert report.zones[0].volumes == ("pvc-etcd-0", "pvc-postgres-0")
        rows = {w.workload: w for w in report.workloads}
        assert rows["StatefulSet/infra/zk"].pods == {"eastus-1": 2, "eastus-2": 1, "eastus-3": 0}
        assert rows["StatefulSet/infra/zk"].skew == 2
        assert rows["StatefulSet/infra/zk"].loss == {"eastus-1": "quorum-lost", "eastus-2": "degraded",
                                                     "eastus-3": "ok"}
        assert rows["StatefulSet/infra/etcd"].loss == dict.fromkeys(("eastus-1", "eastus-2", "eastus-3"), "stranded")
        assert not report.ok
        assert all(f.message.startswith("if eastus-") for f in report.findings)

    def test_capacity(self) -> None:
        """Allocatable and requested CPU and memory per zone; nodes without a zone get their own column."""
        snap = {"nodes": [node("a", "eastus-1"), node("b", "eastus-1", cpu="3500m", ready=False),
                          node("c", "eastus-2"), node("d", None)],
                "pods": [pod("p1", "a"), pod("p2", "b", cpu="1", memory="1Gi"), pod("p3", "c"), pod("p4", "d")]}
        report = zonereport.build(snap)
        zones = {z.zone: z for z in report.zones}
        assert list(zones) == ["eastus-1", "eastus-2", zonereport.NO_ZONE]
        one = zones["eastus-1"]
        assert (one.nodes, one.ready, one.cpu_allocatable, one.cpu_requested) == (2, 1, 7500, 1250)
        assert (one.memory_allocatable, one.memory_requested) == (32 * 2**30, 2**30 + 128 * 2**20)
        assert zones[zonereport.NO_ZONE].pods == 1
        (web,) = report.workloads
        assert web.pods == {"eastus-1": 2, "eastus-2": 1, zonereport.NO_ZONE: 1} and web.skew == 1

    def test_fault_domains_are_not_zones(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An unzoned pool's nodes carry fault domains ("0", "1"): columns of kind faultDomain, said so in words."""
        snap = {"nodes": [node("a", "eastus-1"), node("b", "eastus-2"), node("u0", "0"), node("u1", "1")],
                "pods": [pod("p1", "a"), pod("p2", "u0", owner="db"), pod("p3", "u0", owner="db")]}
        report = zonereport.build(snap)
        assert {z.zone: z.kind for z in report.zones} == {"0": "faultDomain", "1": "faultDomain",
                                                          "eastus-1": "zone", "eastus-2": "zone"}
        assert [z["kind"] for z in report.as_dict()["zones"]] == ["zone", "zone", "faultDomain", "faultDomain"]
        assert any(f.message.startswith("if fault domain 0 is lost: ") for f in report.findings), report.findings
        assert not any(f.message.startswith("if 0 is lost") or "zone" in f.message
                       for f in report.findings if "fault domain" in f.message)
        path = tmp_path / "snap.yaml"
        path.write_text(yaml.safe_dump_all([*snap["nodes"], *snap["pods"]]))
        main(["report", "-f", str(path)])
        out = capsys.readouterr().out
        assert "fault domain 0" in out and "fault domain 1" in out
        page = tmp_path / "zones.html"
        main(["report", "-f", str(path), "--html", str(page), "-o", "json"])
        capsys.readouterr()
        assert ">fault domain 0</th>" in page.read_text() and "each zone or fault domain" in page.read_text()

    @pytest.mark.parametrize(("value", "problem"), [("12 cores", "is not a quantity"), ("1e99", "out of range"),
                                                    ("", "is not a quantity")])
    def test_bad_quantity_named(self, value: str, problem: str) -> None:
        """A request that is not a quantity is one error naming the pod, container and value."""
        snap = {"nodes": [node("a", "eastus-1")], "pods": [pod("p1", "a", cpu=value)]}
        with pytest.raises(quantity.InvalidQuantity, match=problem) as info:
            zonereport.build(snap)
        assert "pod app/p1 container c requests.cpu" in str(info.value)


class TestCommand:
    """``cloudzones report`` prints, writes the page, and exits 1 on an error finding."""

    def test_text_and_exit(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Tables with a column per zone; exit 1 because the fixture loses quorum somewhere."""
        assert main(["report", "-f", str(SNAPSHOT)]) == 1
        out = capsys.readouterr().out
        assert "ZONES" in out and "WORKLOADS" in out and "FINDINGS" in out
        assert "StatefulSet/infra/zk            2     2 quorum-lost  1 degraded  0 ok" in out

    def test_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        """-o json is the report's data."""
        main(["report", "-f", str(SNAPSHOT), "-o", "json"])
        data = json.loads(capsys.readouterr().out)
        assert data["kind"] == "ZoneReport" and len(data["outages"]) == 3 and data["ok"] is False

    def test_html_is_self_contained(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """One page: every zone a column, every workload a row, every verdict in words; no script, no URL."""
        page = tmp_path / "zones.html"
        main(["report", "-f", str(SNAPSHOT), "--html", str(page)])
        text = page.read_text(encoding="utf-8")
        assert text.startswith("<!DOCTYPE html>") and "<script" not in text.lower()
        assert "http://" not in text and "https://" not in text and "src=" not in text and "href=" not in text
        for zone in ("eastus-1", "eastus-2", "eastus-3"):
            assert f'<th scope="col">{zone}</th>' in text
        assert '<th scope="row">StatefulSet/infra/zk</th>' in text and "quorum-lost" in text

    def test_file_and_cluster_options_clash(self, capsys: pytest.CaptureFixture[str]) -> None:
        """-f with -n is a usage error (exit 2), one line."""
        assert main(["report", "-f", str(SNAPSHOT), "-n", "app"]) == 2
        assert capsys.readouterr().err.count("\n") == 1

    @pytest.mark.parametrize("command", [["report"], ["plan", "outage", "--zone", "eastus-1"]])
    @pytest.mark.parametrize("key", ["\udcff", "zone key", "zone-", "a/b/c", ""])
    def test_zone_key_must_be_a_label_key(self, command: list[str], key: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """A --zone-key no node could carry (every node would look zone-less) is a usage error naming it."""
        with pytest.raises(SystemExit) as caught:
            main([*command, "-f", str(SNAPSHOT), "--zone-key", key])
        last = capsys.readouterr().err.splitlines()[-1]
        assert caught.value.code == 2 and f"argument --zone-key: {key!r} is not a label key" in last


class TestLive:
    """Without -f the cluster is read through kubeconfig: the same answer as its snapshot."""

    def kubeconfig(self, api: FakeKubeApi, tmp_path: pathlib.Path) -> str:
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
            "users": [{"name": "me", "user": {"token": "t"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}]}))
        return str(path)

    def test_live_equals_snapshot(self, api: FakeKubeApi, tmp_path: pathlib.Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
        """Objects created in the API server report as their snapshot does; the missing CRD is a note."""
        snap = snapshot()
        plural = {"nodes": "nodes", "pods": "pods", "persistentVolumeClaims": "persistentvolumeclaims",
                  "persistentVolumes": "persistentvolumes", "statefulSets": "statefulsets"}
        for key, resource in plural.items():
            for obj in snap[key]:
                api.create(resource, obj, namespace=(obj.get("metadata") or {}).get("namespace"))
        assert main(["report", "--kubeconfig", self.kubeconfig(api, tmp_path), "-o", "json"]) == 1
        captured = capsys.readouterr()
        assert "FoundationDBCluster (foundationdbclusters.apps.foundationdb.org/v1beta2) is not installed" in \
            captured.err
        live = json.loads(captured.out)
        offline = zonereport.build({**snap, "foundationDBClusters": []}).as_dict()
        assert live == json.loads(json.dumps(offline))


class TestKubectlPlugin:
    """``kubectl zones`` speaks cloudzones."""

    def test_report(self, capsys: pytest.CaptureFixture[str]) -> None:
        """kubectl zones report -f ... is cloudzones report."""
        assert kubectl.main(["report", "-f", str(SNAPSHOT), "-o", "json"]) == 1
        assert json.loads(capsys.readouterr().out)["kind"] == "ZoneReport"

    def test_outage(self, capsys: pytest.CaptureFixture[str]) -> None:
        """kubectl zones outage ZONE is cloudzones plan outage --zone ZONE."""
        assert kubectl.main(["outage", "eastus-3", "-f", str(SNAPSHOT), "-o", "json"]) == 1
        assert json.loads(capsys.readouterr().out)["zone"] == "eastus-3"

    @pytest.mark.parametrize("argv", [["outage"], ["outage", "-f", "x"], ["frobnicate"], []])
    def test_usage(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """A missing zone or an unknown word: exit 2 with one error line (no arguments: usage)."""
        assert kubectl.main(argv) == 2
        captured = capsys.readouterr()
        assert ("error:" in captured.err and captured.err.count("\n") == 1) or "usage:" in captured.out


class TestRefusals:
    """Hostile or mistaken input: one line naming it, exit 1 (2 for usage)."""

    @pytest.mark.parametrize(("argv", "code", "says"), [
        (["report", "--kubeconfig", "/nonexistent"], 1, "kubeconfig /nonexistent: cannot read"),
        (["report", "-f", "/nonexistent"], 1, "snapshot /nonexistent: cannot read"),
        (["report", "-f", str(SNAPSHOT), "--html", "/nonexistent/dir/x.html"], 1, "cannot write /nonexistent/dir"),
        (["plan", "replication"], 2, "say which LokiStack to read from the cluster with --name"),
        (["plan", "coordinators", "-f", str(SNAPSHOT), "--name", "x"], 2, "-f reads a file"),
        (["plan", "locality", "-f", str(SNAPSHOT), "--storage-class", "x"], 2, "-f reads a file"),
        (["plan", "locality", "--nodes", str(SNAPSHOT)], 2, "--nodes goes with -f"),
    ])
    def test_one_line(self, argv: list[str], code: int, says: str, capsys: pytest.CaptureFixture[str]) -> None:
        """The exit code and the one error line."""
        assert main(argv) == code
        lines = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert len(lines) == 1 and says in lines[0], lines

    def test_not_a_snapshot(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A pod whose request is not a quantity: one line naming pod, container and value."""
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump({"nodes": [node("a", "eastus-1")], "pods": [pod("p1", "a", cpu="lots")]}))
        assert main(["report", "-f", str(bad)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pod app/p1 container c requests.cpu: 'lots' is not a quantity" in err


class TestPlannerFindings:
    """LokiStacks in the snapshot are planned; their rule breaks are report findings."""

    def test_loki_rules(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A stack whose replication factor exceeds the zones: the planner's error, naming the stack; exit 1."""
        stack = next(d for d in documents.manifests(ROOT / "fixtures" / "plans" / "loki-factor-too-high.yaml",
                                                    what="input") if d.get("kind") == "LokiStack")
        snap = {**snapshot(), "lokiStacks": [stack]}
        report = zonereport.build(snap)
        name = f"LokiStack {stack['metadata'].get('namespace', 'default')}/{stack['metadata']['name']}"
        loki = [f for f in report.findings if f.message.startswith(name)]
        assert loki and any(f.severity.value == "error" for f in loki), report.findings
        path = tmp_path / "with-loki.yaml"
        path.write_text(yaml.safe_dump_all([*snapshot()["nodes"], *snapshot()["pods"], stack]))
        assert main(["report", "-f", str(path), "-o", "json"]) == 1
        assert any(f["message"].startswith(name) for f in json.loads(capsys.readouterr().out)["findings"])

    def test_foundationdb_from_its_pods(self) -> None:
        """Coordinators are chosen from the cluster's running pods: six nodes cannot give nine in three halls."""
        cluster = {"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
                   "metadata": {"name": "fdb9", "namespace": "db"},
                   "spec": {"version": "7.1.57", "databaseConfiguration": {"redundancy_mode": "three_data_hall"},
                            "localities": [{"key": "zoneid", "topologyKey": "kubernetes.io/hostname"},
                                           {"key": "data_hall", "topologyKey": "topology.kubernetes.io/zone"}]}}
        snap = snapshot()
        fdb_pods = [fdb_pod(f"fdb9-storage-{i}", n["metadata"]["name"], "storage", i)
                    for i, n in enumerate(snap["nodes"], start=1)]
        report = zonereport.build({**snap, "pods": [*snap["pods"], *fdb_pods], "foundationDBClusters": [cluster]})
        mine = [f for f in report.findings if f.message.startswith("FoundationDBCluster db/fdb9: ")]
        assert mine and all(f.severity.value == "error" for f in mine), report.findings
        assert any("data_hall" in f.message for f in mine), mine
        # The fixture's own clusters (pods without a process class, no processCounts) have nothing to plan.
        assert not [f for f in report.findings if f.message.startswith("FoundationDBCluster db/fdb:")]

    def test_foundationdb_pod_labels(self) -> None:
        """Pods become processes by the cluster's label settings: class, process-group id, node, literal env."""
        cluster = {"metadata": {"name": "c", "namespace": "db"}, "spec": {"labels": {
            "matchLabels": {"team": "c"}, "processClassLabels": ["my-class"], "processGroupIDLabels": ["my-id"]}}}
        pods = [{"metadata": {"name": "p1", "namespace": "db", "labels": {"team": "c", "my-class": "log",
                                                                           "my-id": "log-1"}},
                 "spec": {"nodeName": "n1", "containers": [{"name": "fdb", "env": [
                     {"name": "FDB_HALL", "value": "h1"}, {"name": "FROM_FIELD", "valueFrom": {}}]}]}},
                {"metadata": {"name": "p2", "namespace": "db", "labels": {"team": "c"}}, "spec": {}},
                {"metadata": {"name": "p3", "namespace": "other", "labels": {"team": "c", "my-class": "log"}}}]
        assert fdblocality.processes_from_pods(cluster, pods) == [
            {"id": "log-1", "processClass": "log", "node": "n1", "env": {"FDB_HALL": "h1"}}]

    def test_longhorn(self) -> None:
        """Longhorn's objects in the snapshot (List form) are planned per namespace: its errors and warnings."""
        raw = yaml.safe_load((ROOT / "fixtures" / "plans" / "longhorn-volumes.yaml").read_text())
        settings = [{"apiVersion": "longhorn.io/v1beta2", "kind": "Setting", "metadata": {"name": k}, "value": v}
                    for k, v in raw["settings"].items()]
        items = [*raw["volumes"], *raw["replicas"], *raw["nodes"], *settings]
        snap = outage.snapshot_from_documents([{"kind": "List", "items": [*snapshot()["nodes"], *items]}])
        assert len(snap["longhornNodes"]) == len(raw["nodes"]) and len(snap["nodes"]) == 6
        report = zonereport.build(snap)
        longhorn = {f.subject: f.severity.value for f in report.findings if f.message.startswith("Longhorn in ")}
        assert longhorn == {"pvc-no-fitting-disk": "warning", "pvc-strict-3": "error", "pvc-unknown-mode": "error"}


def fdb_pod(name: str, node_name: str, process_class: str, index: int) -> dict[str, Any]:
    """A running FoundationDB pod as the operator labels it."""
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "db", "labels": {
        "foundationdb.org/fdb-cluster-name": name.split("-", maxsplit=1)[0], "foundationdb.org/fdb-process-class": process_class,
        "foundationdb.org/fdb-process-group-id": f"{process_class}-{index}"}},
        "spec": {"nodeName": node_name, "containers": [{"name": "foundationdb"}]}, "status": {"phase": "Running"}}
