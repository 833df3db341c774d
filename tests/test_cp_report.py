"""`cloudzones report` against the real kube-apiserver: the live answer equals the answer from a kubectl dump.

Objects of this module (nodes labelled with three zones, a StatefulSet the real scheduler places, a
zonal PV, and a FoundationDBCluster under a CRD installed for the test, tests/data/foundationdb-crd.yaml)
are created through the API. ``cloudzones report`` then reads the cluster live, and again from what
``kubectl get -o json`` printed of the same objects: both JSON answers must be identical (the live
path reduces pods as they arrive, so this also proves the reduction keeps everything the report
reads). A CRD that is not installed (LokiStack's, here) is skipped with a note.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import errors, kube, labels
from cloudzones.cli import main
from cloudzones.testing.controlplane import ControlPlane

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRD = ROOT / "tests" / "data" / "foundationdb-crd.yaml"
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
    cp.kubectl("apply", "-f", str(CRD))
    cp.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/foundationdbclusters.apps.foundationdb.org")
    try:
        yield cp
    finally:
        cp.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        cp.kubectl("delete", "pods", "--all", "--force", "--grace-period=0", "--ignore-not-found", "-n", NAMESPACE)
        cp.kubectl("delete", "--ignore-not-found", "-f", str(CRD))
        with contextlib.suppress(errors.KubeApiError):
            cp.client.delete(kube.PERSISTENT_VOLUMES, f"czr-{SUFFIX}-pv")
        for name in NODES:
            cp.client.delete(kube.NODES, name)


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
        kinds = "nodes,pods,persistentvolumeclaims,persistentvolumes,statefulsets,foundationdbclusters"
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
        assert "FoundationDBCluster (foundationdbclusters" not in notes  # its CRD is installed: read, not skipped
        assert live == before
        zones = {z["zone"]: z for z in live["zones"]}
        assert set(ZONES) <= set(zones) and f"czr-{SUFFIX}-pv" in zones["eastus-2"]["pinnedVolumes"]
        (zk,) = [w for w in live["workloads"] if w["workload"] == f"StatefulSet/{NAMESPACE}/zk"]
        assert sorted(zk["podsPerZone"][z] for z in ZONES) == [1, 1, 1] and zk["skew"] == 0
        assert any(o["coordinators"] for o in live["outages"])

    def test_namespace_scope(self, cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
        """-n reads that namespace's pods only (nodes stay cluster-wide)."""
        bound(cluster)
        scoped, _ = report(capsys, "--kubeconfig", cluster.kubeconfig, "-n", NAMESPACE)
        assert {w["workload"] for w in scoped["workloads"]} <= {f"StatefulSet/{NAMESPACE}/zk",
                                                                f"FoundationDBCluster/{NAMESPACE}/fdb"}
