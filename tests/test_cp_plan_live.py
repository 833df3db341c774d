"""`cloudzones plan replication|coordinators` reading the real API server: the same plan as from the files.

The LokiStack and FoundationDBCluster of fixtures/plans are created through the API under CRDs installed
for the test (tests/data/loki-crd.yaml, foundationdb-crd.yaml: reduced stand-ins, origins in their
headers), beside nodes labelled like the fixture's; ``plan ... --name`` must print exactly what
``plan ... -f`` prints for the fixture file plus those nodes as kubectl dumps them.
"""

from __future__ import annotations

import json
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import documents, kube
from cloudzones.cli import main
from cloudzones.testing.controlplane import ControlPlane

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRDS = [ROOT / "tests" / "data" / name for name in ("loki-crd.yaml", "foundationdb-crd.yaml", "longhorn-crds.yaml")]
PLANS = ROOT / "fixtures" / "plans"
SUFFIX = uuid.uuid4().hex[:6]
NAMESPACE = f"cp-plan-{SUFFIX}"


def fixture_nodes() -> list[dict[str, Any]]:
    """The nodes of fixtures/plans/nodes-3zones.yaml, renamed for this module."""
    nodes = [dict(n) for n in documents.manifests(PLANS / "nodes-3zones.yaml", what="nodes")]
    for node in nodes:
        node["metadata"] = {**node["metadata"], "name": f"{node['metadata']['name']}-{SUFFIX}"}
    return nodes


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The CRDs, our nodes and namespace; removed afterwards."""
    cp = control_plane
    for crd in CRDS:
        cp.kubectl("apply", "-f", str(crd))
    cp.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/lokistacks.loki.grafana.com",
               "crd/foundationdbclusters.apps.foundationdb.org",
               *(f"crd/{plural}.longhorn.io" for plural in ("volumes", "replicas", "nodes", "settings")))
    nodes = fixture_nodes()
    cp.add_nodes(nodes)
    cp.ensure_namespace(NAMESPACE)
    try:
        yield cp
    finally:
        cp.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        for crd in CRDS:
            cp.kubectl("delete", "--ignore-not-found", "-f", str(crd))
        for node in nodes:
            cp.client.delete(kube.NODES, node["metadata"]["name"])


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """``cloudzones plan ARGV -o json``'s answer."""
    main(["plan", *argv, "-o", "json"])
    return dict(json.loads(capsys.readouterr().out))


def our_nodes(cp: ControlPlane, path: pathlib.Path) -> pathlib.Path:
    """The cluster's nodes as kubectl prints them (every node: the live plan reads them all)."""
    path.write_text(cp.kubectl("get", "nodes", "-o", "json").stdout, encoding="utf-8")
    return path


class TestLivePlans:
    """--name reads the object and every node; the plan equals the file's."""

    @pytest.mark.parametrize("case", [
        ("replication", "loki-zone-aware.yaml", "loki.grafana.com/v1"),
        ("coordinators", "fdb-three-data-hall.yaml", "apps.foundationdb.org/v1beta2"),
    ], ids=["LokiStack", "FoundationDBCluster"])
    def test_same_plan(self, cluster: ControlPlane, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
                       case: tuple[str, str, str]) -> None:
        """The object created from the fixture plans as the fixture does, against the same nodes."""
        what, fixture, version = case
        (obj,) = [d for d in documents.manifests(PLANS / fixture, what="input") if d.get("kind") != "Node"]
        # The fixture's top-level "processes" is our file format's (FoundationDB keeps processes in pods).
        obj = {k: v for k, v in obj.items() if k != "processes"}
        name = obj["metadata"]["name"]
        body = {**obj, "apiVersion": version, "metadata": {"name": name, "namespace": NAMESPACE}}
        answer = cluster.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
        assert answer.returncode == 0, answer.stderr
        only_object = tmp_path / "object.json"
        only_object.write_text(json.dumps(obj))
        live = plan(capsys, what, "--name", name, "-n", NAMESPACE, "--kubeconfig", cluster.kubeconfig)
        offline = plan(capsys, what, "-f", str(only_object), "--nodes", str(our_nodes(cluster, tmp_path / "n.json")))
        assert live == offline, json.dumps([(k, live.get(k), offline.get(k)) for k in sorted(set(live) | set(offline))
                                            if live.get(k) != offline.get(k)])

    def test_longhorn(self, cluster: ControlPlane, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """plan locality without -f reads Longhorn's objects in -n and plans as the same objects in a file."""
        import yaml

        source = yaml.safe_load((PLANS / "longhorn-volumes.yaml").read_text(encoding="utf-8"))
        sc_name = f"longhorn-local-{SUFFIX}"
        storage_class = {**source["storageClass"], "metadata": {"name": sc_name}}
        docs: list[dict[str, Any]] = [storage_class]
        for key in ("volumes", "replicas", "nodes"):
            for obj in source[key]:
                docs.append({**obj, "metadata": {**obj["metadata"], "namespace": NAMESPACE}})
        for name, value in source["settings"].items():
            docs.append({"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
                         "metadata": {"name": name, "namespace": NAMESPACE}, "value": value})
        created = cluster.kubectl("create", "-f", "-", input="\n".join(json.dumps(d) for d in docs), check=False)
        assert created.returncode == 0, created.stderr
        try:
            objects = tmp_path / "longhorn.json"
            objects.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": docs}))
            live = plan(capsys, "locality", "-n", NAMESPACE, "--storage-class", sc_name,
                        "--kubeconfig", cluster.kubeconfig)
            offline = plan(capsys, "locality", "-f", str(objects), "--nodes", str(our_nodes(cluster, tmp_path / "n.json")))
            assert live == offline
            assert live["volumes"]
        finally:
            cluster.kubectl("delete", "storageclass", sc_name, "--ignore-not-found")

    def test_missing_object(self, cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
        """A name that does not exist: one line, exit 1."""
        code = main(["plan", "replication", "--name", "nope", "-n", NAMESPACE, "--kubeconfig", cluster.kubeconfig])
        err = capsys.readouterr().err
        assert code == 1 and err.count("\n") == 1 and f"no LokiStack {NAMESPACE}/nope" in err
