"""The pod zone annotator on a real API server: real pods bound to real nodes learn their zone.

`cloudzones controller --annotate-pods` runs as a process with an admin kubeconfig (least-privilege
runs are tested elsewhere). There is no kubelet, so pods bound with ``spec.nodeName`` stay Pending,
which is all the annotator needs. The example ``deploy/examples/zone-injection.yaml`` is checked
against the real API server too: its downward-API field paths are accepted, and a pod built from
its template gets the annotations those paths read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from cloudzones import kube, labels
from cloudzones.testing.controlplane import ControlPlane
from tests.processes import REGION, ROOT, Service, fake_azure

NAMESPACE = "cp-annotator"
SELECTOR = "cloudzones.io/zone-injection"
SUFFIX = uuid.uuid4().hex[:6]
NODES = {f"cp-annotator-{SUFFIX}-1": {labels.ZONE: "eastus-1", labels.REGION: REGION},
         f"cp-annotator-{SUFFIX}-2": {labels.ZONE: "eastus-2", labels.REGION: REGION},
         f"cp-annotator-{SUFFIX}-noregion": {labels.ZONE: "eastus-3"}}
"""Unique names: another module runs the node labeller against the same cluster. No providerID, so
the controller's labeller skips them and their labels stay as written here."""
ONE, TWO, NO_REGION = NODES
EXAMPLE = ROOT / "deploy/examples/zone-injection.yaml"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"


def pod(name: str, node: str, *, selected: bool = True) -> dict[str, Any]:
    """A pod bound to ``node``, selected for the annotator unless ``selected`` is False."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {SELECTOR: "enabled" if selected else "disabled"}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox:1.36"}]}}


def annotations_of(cp: ControlPlane, name: str) -> dict[str, str]:
    """Block until pod ``name`` carries the zone annotations (fails after 30 s); returns its annotations."""
    found = cp.watch_until(PODS, lambda p: p["metadata"]["name"] == name
                           and labels.POD_ZONES in (p["metadata"].get("annotations") or {}))
    assert found is not None, f"pod {name} was never annotated"
    return dict(found["metadata"]["annotations"])


@pytest.fixture(scope="module")
def annotator(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The controller with the pod annotator, over this module's nodes and namespace."""
    control_plane.ensure_namespace(NAMESPACE)
    control_plane.add_nodes([{"metadata": {"name": name, "labels": node_labels}}
                             for name, node_labels in NODES.items()])
    try:
        with fake_azure(tmp_path_factory.mktemp("cp-annotator-azure")) as cloud:
            service = Service("controller", "--cloud-config", str(cloud.cloud_config), "--kubeconfig",
                              control_plane.kubeconfig, "--no-leader-election", "--metrics-port", "0",
                              "--annotate-pods", f"{SELECTOR}=enabled", env=cloud.env)
            try:
                service.wait_for("controller running")
                yield service
            finally:
                assert service.stop() == 0, service.log[-2000:]
                assert service.process.stderr is not None
                service.process.stderr.close()  # Service.stop leaves it to the GC: a ResourceWarning
    finally:
        control_plane.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        for name in NODES:
            control_plane.client.delete(kube.NODES, name)


class TestAnnotator:
    """Bound pods matching the selector get their node's zone, region and the joined zones annotation."""

    def test_bound_pods_annotated(self, control_plane: ControlPlane, annotator: Service) -> None:
        """Each pod gets exactly its own node's zone and region, and ``<zone>_<region>``."""
        for index, node in enumerate((ONE, TWO), start=1):
            control_plane.client.create(kube.PODS, pod(f"bound-{index}", node), namespace=NAMESPACE)
        for index, node in enumerate((ONE, TWO), start=1):
            zone = NODES[node][labels.ZONE]
            assert annotations_of(control_plane, f"bound-{index}") == {
                labels.ZONE: zone, labels.REGION: REGION, labels.POD_ZONES: f"{zone}_{REGION}"}
        stored = control_plane.client.get(kube.PODS, "bound-1", namespace=NAMESPACE)
        assert stored["status"]["phase"] == "Pending"  # no kubelet: annotated while still Pending

    def test_unselected_pod_untouched(self, control_plane: ControlPlane, annotator: Service) -> None:
        """A pod without the selector label is left alone while a selected one beside it is annotated."""
        control_plane.client.create(kube.PODS, pod("unselected", ONE, selected=False), namespace=NAMESPACE)
        control_plane.client.create(kube.PODS, pod("selected", ONE), namespace=NAMESPACE)
        assert annotations_of(control_plane, "selected")[labels.ZONE] == "eastus-1"
        other = control_plane.client.get(kube.PODS, "unselected", namespace=NAMESPACE)
        assert not other["metadata"].get("annotations")

    def test_missing_label_event_then_annotated(self, control_plane: ControlPlane, annotator: Service) -> None:
        """A node without a region label gets the pod a TopologyLabelMissing Event; labelling the node annotates it."""
        control_plane.client.create(kube.PODS, pod("waiting", NO_REGION), namespace=NAMESPACE)
        event = control_plane.watch_until(f"/api/v1/namespaces/{NAMESPACE}/events",
                                          lambda e: e["involvedObject"].get("name") == "waiting")
        assert event is not None and event["reason"] == "TopologyLabelMissing" and event["type"] == "Warning"
        assert labels.REGION in event["message"]
        assert not control_plane.client.get(kube.PODS, "waiting", namespace=NAMESPACE)["metadata"].get("annotations")
        control_plane.client.patch(kube.NODES, NO_REGION, {"metadata": {"labels": {labels.REGION: REGION}}})
        assert annotations_of(control_plane, "waiting")[labels.POD_ZONES] == f"eastus-3_{REGION}"


class TestZoneInjectionExample:
    """deploy/examples/zone-injection.yaml is accepted by the real API server and works with the annotator."""

    def test_server_side_dry_run(self, control_plane: ControlPlane, annotator: Service) -> None:
        """``kubectl apply --dry-run=server`` accepts every object of the example, field paths included."""
        result = control_plane.kubectl("apply", "--dry-run=server", "-n", NAMESPACE, "-f", str(EXAMPLE))
        assert "deployment.apps/zone-injection-demo created (server dry run)" in result.stdout

    def test_template_pod_gets_what_it_reads(self, control_plane: ControlPlane, annotator: Service) -> None:
        """A pod from the example's template, bound to a node, gets every annotation its fieldRefs name."""
        deployment = next(d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d and d["kind"] == "Deployment")
        template = deployment["spec"]["template"]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": "from-example"},
                "spec": {**template["spec"], "nodeName": TWO}}
        created = control_plane.client.create(kube.PODS, body, namespace=NAMESPACE)
        paths = [v["valueFrom"]["fieldRef"]["fieldPath"] for c in created["spec"]["containers"] for v in c["env"]]
        # The API server adds the service-account token volume; the example's own is the downwardAPI one.
        paths += [i["fieldRef"]["fieldPath"] for v in created["spec"]["volumes"] if "downwardAPI" in v
                  for i in v["downwardAPI"]["items"]]
        # The stored pod keeps the paths the kubelet will resolve, and the annotator supplies each one.
        assert set(paths) == {f"metadata.annotations['{key}']" for key in (labels.ZONE, labels.REGION, labels.POD_ZONES)}
        got = annotations_of(control_plane, "from-example")
        assert {path: got.get(path.split("'")[1]) for path in paths} == {
            f"metadata.annotations['{labels.ZONE}']": "eastus-2", f"metadata.annotations['{labels.REGION}']": REGION,
            f"metadata.annotations['{labels.POD_ZONES}']": f"eastus-2_{REGION}"}
