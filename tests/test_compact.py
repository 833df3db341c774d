"""Snapshot files read item by item (`documents.load_streamed`) and pods compacted (`workloads.compact`)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from cloudzones import documents, errors, shapes
from cloudzones.workloads import compact, outage, zonereport

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "fixtures" / "plans" / "snapshot-3zones.yaml"


def pod(name: str, *, node: str = "n1", owner: str = "web-5d8f7", **extra: Any) -> dict[str, Any]:
    """A pod as kubectl prints it, with fields the planners do not read."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "shop", "uid": f"uid-{name}", "labels": {"app": "web"},
        "annotations": {"note": "x"}, "resourceVersion": "12",
        "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "controller": True,
                             "blockOwnerDeletion": True, "uid": "rs"}]},
        "spec": {"nodeName": node, "schedulerName": "default-scheduler", "containers": [
            {"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {}}],
             "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}}],
            "volumes": [{"name": "token", "projected": {"sources": []}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t"}]}, **extra}


class TestPodCompactor:
    """What is kept of a pod, and what is stored once."""

    def test_projection(self) -> None:
        """Identity, owners, node, claims, requests, literal env, phase, IPs and conditions; nothing else."""
        kept = compact.PodCompactor()(pod("a"))
        assert kept == {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "a", "namespace": "shop", "uid": "uid-a", "labels": {"app": "web"},
                                     "annotations": {"note": "x"}, "ownerReferences": [
                                         {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7",
                                          "uid": "rs", "controller": True}]},
                        "spec": {"nodeName": "n1", "containers": [
                            {"name": "app", "resources": {"requests": {"cpu": "100m"}}, "env": [
                                {"name": "A", "value": "1"}]}],
                            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-a"}}]},
                        "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
                                   "conditions": [{"type": "Ready", "status": "True"}]}}
        assert compact.project_pod(pod("a")) == kept

    def test_shared_parts(self) -> None:
        """Two replicas share their labels, owners and containers (one object each), not their own claims."""
        compactor = compact.PodCompactor()
        one, two = compactor(pod("a")), compactor(pod("b"))
        assert one["metadata"]["labels"] is two["metadata"]["labels"]
        assert one["metadata"]["ownerReferences"] is two["metadata"]["ownerReferences"]
        assert one["spec"]["containers"] is two["spec"]["containers"]
        assert one["spec"]["volumes"] != two["spec"]["volumes"]
        other = compactor(pod("c", owner="api-1"))
        assert other["metadata"]["ownerReferences"][0]["name"] == "api-1"

    @pytest.mark.parametrize(("change", "path"), [
        (lambda p: p["metadata"].update(labels=["x"]), "pods[3].metadata.labels"),
        (lambda p: p["spec"]["containers"][0]["resources"].update(requests={"cpu": []}),
         "pods[3].spec.containers[0].resources.requests.cpu"),
        (lambda p: p["spec"].update(nodeName=7), "pods[3].spec.nodeName"),
        (lambda p: p["status"].update(podIPs=[{"ip": {"deep": 1}}]), "pods[3].status.podIPs[0].ip"),
    ])
    def test_wrong_type_named(self, change: Any, path: str) -> None:
        """A wrong type in a kept field is a ShapeError with its place, also when the same part was seen fine."""
        compactor = compact.PodCompactor()
        compactor(pod("a"), "pods[0]")
        bad = pod("b")
        change(bad)
        with pytest.raises(shapes.ShapeError) as info:
            compactor(bad, "pods[3]")
        assert info.value.path == path

    def test_unread_fields_not_kept(self) -> None:
        """Deep nesting in a field no planner reads is dropped, not kept (the compact pod's depth is fixed)."""
        deep: Any = "x"
        for _ in range(200):
            deep = {"d": deep}
        kept = compact.PodCompactor()(pod("a", extraField=deep))
        assert "extraField" not in kept


class TestLoadStreamed:
    """Item by item, with the same answers and errors as reading the whole file."""

    def write(self, tmp_path: pathlib.Path, data: Any) -> pathlib.Path:
        path = tmp_path / "snap.json"
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return path

    @pytest.mark.parametrize("form", ["list", "mapping", "array"])
    def test_same_report(self, form: str, tmp_path: pathlib.Path) -> None:
        """The fixture as a kubectl List, the single-mapping form or a bare array: the report of the whole read."""
        docs = documents.manifests(SNAPSHOT, what="snapshot")
        whole = outage.snapshot_from_documents(docs)
        data: Any = {"list": {"apiVersion": "v1", "kind": "List", "items": docs}, "mapping": whole,
                     "array": docs}[form]
        path = self.write(tmp_path, data)
        streamed = outage.snapshot_from_documents(
            documents.load_streamed(path, what="snapshot", each=compact.SnapshotItems()), checked=True)
        assert zonereport.build(streamed).as_dict() == zonereport.build(whole).as_dict()
        assert len(streamed["pods"]) == len(whole["pods"]) > 0

    def test_yaml_takes_the_whole_path(self) -> None:
        """YAML is read whole, then each item goes through the same `each`."""
        seen: list[tuple[str, str]] = []
        docs = documents.load_streamed(SNAPSHOT, what="snapshot",
                                       each=lambda item, place, key: seen.append((place, key)) or item)
        assert docs[0]["kind"] == "List" and seen[0] == ("items[0]", "items") and len(seen) == len(docs[0]["items"])

    @pytest.mark.parametrize(("data", "says"), [
        ('{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": 1}}]}', "items[0].metadata.name: expected a string"),
        ('{"pods": [{}, {"spec": []}]}', "pods[1].spec: expected a mapping, got a list"),
        ('{"nodes": [{"metadata": {"labels": {"a": 1}}}]}', "nodes[0].metadata.labels.a: expected a string"),
        ('{"kind": "List", "items": [3]}', "items[0]: expected a manifest (a mapping), got a number"),
        ('{"kind": "List", "items": [' + '{"kind": "X", "a": ' * 70 + "1" + "}" * 70 + "]}",
         "items[0]: nested more than 64 levels deep"),
        ('{"kind": "List", "items": [{"kind": "Pod", "x": 123456789012345678901234567890}]}', None),
        ('{"kind": "List", "items": [', "not valid YAML or JSON"),
        ('{"kind": "Pod", "metadata": {"name": 1}}', "metadata.name: expected a string"),
        ('{"kind": "List", "items": [{"kind": "List", "items": [{"kind": "Node", "spec": 1}]}]}',
         "spec: expected a mapping"),
    ])
    def test_errors(self, data: str, says: str | None, tmp_path: pathlib.Path) -> None:
        """One InputError naming the file and the place, as the whole read would (numbers past 64 bits: accepted)."""
        path = self.write(tmp_path, data)
        if says is None:
            docs = documents.load_streamed(path, what="snapshot", each=compact.SnapshotItems())
            assert docs[0]["items"][0]["kind"] == "Pod"
            return
        for check_depth in (True, False):  # SnapshotItems bounds depth itself: the report reads without the walk
            with pytest.raises(errors.ConfigError) as info:
                outage.snapshot_from_documents(documents.load_streamed(
                    path, what="snapshot", each=compact.SnapshotItems(), check_depth=check_depth), checked=True)
            text = str(info.value)
            assert says in text and "\n" not in text, text
            # What the reader checks names the file; a document of its own is checked when sorted, by its path.
            assert text.startswith(f"snapshot {path}: ") or not isinstance(info.value, documents.InputError)

    def test_other_values_kept(self, tmp_path: pathlib.Path) -> None:
        """A List's other fields and a mapping's non-list values are decoded whole, not streamed."""
        path = self.write(tmp_path, {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                     "items": []})
        assert documents.load_streamed(path, each=compact.SnapshotItems()) == [
            {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": []}]
        assert yaml.safe_load(path.read_text())["items"] == []
