"""`cloudzones report` against the real kube-apiserver: the live answer equals the answer from a kubectl dump.

Objects of this module (nodes labelled with three zones, a StatefulSet the real scheduler places, a
zonal PV, and under the three operators' CRDs installed for the test — tests/data/foundationdb-crd.yaml,
loki-crd.yaml, longhorn-crds.yaml — a FoundationDBCluster, a LokiStack and Longhorn's volumes, replicas,
nodes and settings) are created through the API. ``cloudzones report`` then reads the cluster live, and
again from what ``kubectl get -o json`` printed of the same objects: both JSON answers must be identical
(the live path compacts pods as they arrive, so this also proves the compaction keeps everything the
report reads), and the planners' findings for all three operators are in it. As a service account bound
to deploy/examples/report-reader.yaml the answer is the same; without Longhorn's rights, Longhorn is
skipped with a note (a CRD that is not installed is skipped the same way: tests/test_zone_report.py).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from cloudzones import errors, kube, labels
from cloudzones.cli import main
from cloudzones.testing.controlplane import ControlPlane

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRDS = [ROOT / "tests" / "data" / name for name in ("foundationdb-crd.yaml", "loki-crd.yaml", "longhorn-crds.yaml")]
LONGHORN = ("volumes", "replicas", "nodes", "settings")
READER = ROOT / "deploy" / "examples" / "report-reader.yaml"
SUFFIX = uuid.uuid4().hex[:6]
NAMESPACE = f"cp-report-{SUFFIX}"
ZONES = ("eastus-1", "eastus-2", "eastus-3")
NODES = [f"czr-{SUFFIX}-{z[-1]}-{i}" for z in ZONES for i in range(2)]


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """Our nodes, namespace, StatefulSet (all pods bound), PV and FoundationDB CRD + cluster; removed afterwards."""
    cp = control_plane
    cp.add_nodes([{"metadata": {"name": n, "labels": {labels.ZONE: f"eastus-{n.split('-')[2]}",
                                                      labels.REGION: "eastus", "cz-report": SUFFIX}}}
                  for n in NODES])
    cp.ensure_namespace(NAMESPACE)
    match = {"app": "zk"}
    cp.request("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets", {
        "metadata": {"name": "zk"}, "spec": {
            "serviceName": "zk", "replicas": 3, "podManagementPolicy": "Parallel", "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": match}, "spec": {
                "nodeSelector": {"cz-report": SUFFIX},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": labels.ZONE,
                                               "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": match}}],
                "containers": [{"name": "zk", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]}}}})
    cp.client.create(kube.PERSISTENT_VOLUMES, {"metadata": {"name": f"czr-{SUFFIX}-pv"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "none",
        "csi": {"driver": "disk.csi.azure.com", "volumeHandle": "x"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": labels.ZONE, "operator": "In", "values": ["eastus-2"]}]}]}}}})
    for crd in CRDS:
        cp.kubectl("apply", "-f", str(crd))
    cp.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/foundationdbclusters.apps.foundationdb.org",
               "crd/lokistacks.loki.grafana.com", *(f"crd/{plural}.longhorn.io" for plural in LONGHORN))
    created = cp.kubectl("create", "-f", "-", input="\n".join(json.dumps(d) for d in operator_objects()), check=False)
    assert created.returncode == 0, created.stderr
    try:
        yield cp
    finally:
        cp.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        cp.kubectl("delete", "pods", "--all", "--force", "--grace-period=0", "--ignore-not-found", "-n", NAMESPACE)
        for crd in CRDS:
            cp.kubectl("delete", "--ignore-not-found", "-f", str(crd))
        with contextlib.suppress(errors.KubeApiError):
            cp.client.delete(kube.PERSISTENT_VOLUMES, f"czr-{SUFFIX}-pv")
        for name in NODES:
            cp.client.delete(kube.NODES, name)


def operator_objects() -> list[dict[str, Any]]:
    """fixtures/plans/longhorn-volumes.yaml's volumes, replicas, nodes and settings and the LokiStack of
    loki-factor-too-high.yaml, in our namespace."""
    plans = ROOT / "fixtures" / "plans"
    source = yaml.safe_load((plans / "longhorn-volumes.yaml").read_text(encoding="utf-8"))
    stack = yaml.safe_load((plans / "loki-factor-too-high.yaml").read_text(encoding="utf-8"))
    docs = [{**obj, "metadata": {**obj["metadata"], "namespace": NAMESPACE}}
            for obj in (*source["volumes"], *source["replicas"], *source["nodes"], stack)]
    return docs + [{"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
                    "metadata": {"name": name, "namespace": NAMESPACE}, "value": value}
                   for name, value in source["settings"].items()]


def bound(cp: ControlPlane) -> dict[str, Any]:
    """Block until the StatefulSet's three pods are bound to nodes; the pods."""
    seen: dict[str, Any] = {}

    def done(pod: dict[str, Any]) -> bool:
        if pod["spec"].get("nodeName"):
            seen[pod["metadata"]["name"]] = pod
        return len(seen) == 3

    assert cp.watch_until(f"/api/v1/namespaces/{NAMESPACE}/pods", done, timeout=60) is not None, seen
    return seen


def dump(cp: ControlPlane, path: pathlib.Path, kinds: str) -> None:
    """What ``kubectl get KINDS -A -o json`` prints, to ``path``."""
    path.write_text(cp.kubectl("get", kinds, "-A", "-o", "json").stdout, encoding="utf-8")


def report(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict[str, Any], str]:
    """Run ``cloudzones report -o json ARGV``; its JSON and its stderr."""
    main(["report", "-o", "json", *argv])
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


class TestLiveEqualsSnapshot:
    """The same objects give the same report, read live or from a dump."""

    def test_identical(self, cluster: ControlPlane, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Live (kubeconfig) and -f (kubectl's JSON) agree, FoundationDB cluster included."""
        pods = bound(cluster)
        first = next(iter(pods.values()))
        cluster.request("POST", f"/apis/apps.foundationdb.org/v1beta2/namespaces/{NAMESPACE}/foundationdbclusters", {
            "apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
            "metadata": {"name": "fdb"}, "spec": {"version": "7.3.43", "processCounts": {"storage": 3}},
            "status": {"connectionString": f"fdb:abc@{first['metadata']['name']}.zk:4501"}})
        kinds = ",".join(["nodes,pods,persistentvolumeclaims,persistentvolumes,statefulsets,foundationdbclusters,"
                          "lokistacks",
                          *(f"{plural}.longhorn.io" for plural in LONGHORN)])
        # The cluster is shared: another module's namespace may still be emptying. Compare only when a dump
        # before and a dump after the live read agree, i.e. nothing changed around it.
        for _ in range(5):
            dump(cluster, tmp_path / "before.json", kinds)
            live, notes = report(capsys, "--kubeconfig", cluster.kubeconfig)
            dump(cluster, tmp_path / "after.json", kinds)
            before, _ = report(capsys, "-f", str(tmp_path / "before.json"))
            after, _ = report(capsys, "-f", str(tmp_path / "after.json"))
            if before == after:
                break
        else:
            pytest.fail("the cluster kept changing around the live read (5 attempts)")
        assert "skipped" not in notes, notes  # every CRD is installed and readable: read, not skipped
        assert live == before
        zones = {z["zone"]: z for z in live["zones"]}
        assert set(ZONES) <= set(zones) and f"czr-{SUFFIX}-pv" in zones["eastus-2"]["pinnedVolumes"]
        (zk,) = [w for w in live["workloads"] if w["workload"] == f"StatefulSet/{NAMESPACE}/zk"]
        assert sorted(zk["podsPerZone"][z] for z in ZONES) == [1, 1, 1] and zk["skew"] == 0
        assert any(o["coordinators"] for o in live["outages"])
        longhorn = {f["subject"]: f["severity"] for f in live["findings"]
                    if f["message"].startswith(f"Longhorn in {NAMESPACE}: ")}
        assert longhorn == {"pvc-no-fitting-disk": "warning", "pvc-strict-3": "error", "pvc-unknown-mode": "error"}
        assert any(f["severity"] == "error" and f["message"].startswith(f"LokiStack {NAMESPACE}/logs: ")
                   for f in live["findings"]), live["findings"]
        assert any(f["message"].startswith(f"FoundationDBCluster {NAMESPACE}/fdb: ") for f in live["findings"]), \
            live["findings"]

    def test_namespace_scope(self, cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
        """-n reads that namespace's pods only (nodes stay cluster-wide)."""
        bound(cluster)
        scoped, _ = report(capsys, "--kubeconfig", cluster.kubeconfig, "-n", NAMESPACE)
        assert {w["workload"] for w in scoped["workloads"]} <= {f"StatefulSet/{NAMESPACE}/zk",
                                                                f"FoundationDBCluster/{NAMESPACE}/fdb"}


class TestReadRights:
    """deploy/examples/report-reader.yaml grants what the report reads; an optional input it may not list is a note."""

    def bind(self, cp: ControlPlane, account: str, role: dict[str, Any]) -> str:
        """A service account in our namespace bound to ``role`` (created here); its kubeconfig."""
        name = f"{role['metadata']['name']}-{SUFFIX}"
        cp.kubectl("create", "serviceaccount", account, "-n", NAMESPACE)
        cp.kubectl("apply", "-f", "-", input=json.dumps({**role, "metadata": {**role["metadata"], "name": name}}))
        cp.kubectl("create", "clusterrolebinding", name, f"--clusterrole={name}",
                   f"--serviceaccount={NAMESPACE}:{account}")
        return cp.kubeconfig_for(NAMESPACE, account)

    def unbind(self, cp: ControlPlane, role: dict[str, Any]) -> None:
        name = f"{role['metadata']['name']}-{SUFFIX}"
        cp.kubectl("delete", "clusterrolebinding,clusterrole", name, "--ignore-not-found")

    def test_example_role_suffices(self, cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
        """As a service account with only the example ClusterRole: the same report as the admin's, nothing skipped."""
        bound(cluster)
        role = yaml.safe_load(READER.read_text(encoding="utf-8"))
        try:
            config = self.bind(cluster, "reader", role)
            for _ in range(5):  # the cluster is shared: compare two admin reads around the reader's
                before, _ = report(capsys, "--kubeconfig", cluster.kubeconfig)
                reader, notes = report(capsys, "--kubeconfig", config)
                after, _ = report(capsys, "--kubeconfig", cluster.kubeconfig)
                if before == after:
                    break
            assert reader == before
            assert "not allowed" not in notes and "Longhorn in" in json.dumps(reader["findings"])
        finally:
            self.unbind(cluster, role)

    def test_without_longhorn_rights(self, cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
        """A role without Longhorn's rules: four notes (one per kind), the rest of the report, no Longhorn findings."""
        role = yaml.safe_load(READER.read_text(encoding="utf-8"))
        role["rules"] = [r for r in role["rules"] if r["apiGroups"] != ["longhorn.io"]]
        try:
            config = self.bind(cluster, "reader-no-longhorn", role)
            answer, notes = report(capsys, "--kubeconfig", config)
            assert notes.count(".longhorn.io/v1beta2): not allowed to list them: skipped") == 4, notes
            assert answer["zones"] and "Longhorn in" not in json.dumps(answer["findings"])
        finally:
            self.unbind(cluster, role)
