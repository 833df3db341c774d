"""`cloudzones provisioner` for real: kube-apiserver, the PV binder of kube-controller-manager, kube-scheduler.

The provisioner runs as a process with its own service account's token (deploy/provisioner/'s RBAC,
applied by the shared `deployment` fixture), electing a Lease of this module, against FakeArm over
TLS with managed identity. Nodes are this module's own (label ``cz-provisioner``): two in each of
three zones, and one unzoned (a fault domain). Pods select them, so no other test's nodes interfere.

- StatefulSets with volumeClaimTemplates on an Immediate and a WaitForFirstConsumer class: every claim
  is Bound by the real binder, every pod is placed by the real scheduler on a node its PV admits, and
  each StatefulSet's three disks are in three zones.
- ``kill -9`` right after ARM created a disk (its reply held back, so the provisioner never learned)
  and right after the PV was created, then a restart: one disk per claim, no orphan, every claim Bound.
  Deleting the claims deletes exactly the disks of ``Delete`` volumes.
- Classes that break a rule: the claim stays Pending with one ``ProvisioningFailed`` Event naming the
  rule, and ARM sees no write. A pod pinned to the unzoned node: refused with the ``selected-node`` rule.
"""

from __future__ import annotations

import contextlib
import json
import signal
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cloudzones import errors, kube, labels
from cloudzones.services import claims
from cloudzones.testing.controlplane import ControlPlane
from tests import cp_deploy
from tests.processes import REGION, FakeAzure, Service, fake_azure

SUFFIX = uuid.uuid4().hex[:6]
NAMESPACE = f"cp-provisioner-{SUFFIX}"
SYSTEM = cp_deploy.NAMESPACE
ACCOUNT = "cloudzones-provisioner"
LEASE = f"cz-provisioner-{SUFFIX}"
NODE_LABEL = "cz-provisioner"
ZONES = [f"{REGION}-{n}" for n in (1, 2, 3)]
NAME = "cloudzones.io/azure-disk"

deployment = cp_deploy.deployment  # deploy/ (with the provisioner's RBAC) applied for this module

Objects = dict[str, dict[str, Any]]


def node(name: str, zone: str, *, unzoned: bool = False) -> dict[str, Any]:
    """One of our nodes; unzoned nodes carry their fault domain as the zone label, as the labeller writes it."""
    node_labels = {labels.ZONE: zone, labels.REGION: REGION, "kubernetes.io/hostname": name,
                   NODE_LABEL: "unzoned" if unzoned else SUFFIX}
    if unzoned:
        node_labels[labels.FAULT_DOMAIN] = zone
    return {"metadata": {"name": name, "labels": node_labels}}


NODES = [node(f"czp-{SUFFIX}-{zone[-1]}-{i}", zone) for zone in ZONES for i in range(2)]
UNZONED = node(f"czp-{SUFFIX}-unzoned", "0", unzoned=True)


def storage_class(name: str, *, binding: str = "Immediate", reclaim: str = "Delete",
                  **parameters: str) -> dict[str, Any]:
    """A StorageClass of ours named ``<name>-<suffix>``."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": f"{name}-{SUFFIX}"},
            "provisioner": NAME, "parameters": {"skuName": "Premium_LRS", **parameters},
            "reclaimPolicy": reclaim, "volumeBindingMode": binding}


def claim(name: str, class_name: str) -> dict[str, Any]:
    """A 1 GiB claim on class ``<class_name>-<suffix>``."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": f"{class_name}-{SUFFIX}",
                     "resources": {"requests": {"storage": "1Gi"}}}}


def stateful_set(name: str, class_name: str, *, node_label: str = SUFFIX, replicas: int = 3) -> dict[str, Any]:
    """Parallel pod management (no kubelet will ever make pod 0 Ready), spread over zones, on our nodes."""
    match = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "serviceName": name, "replicas": replicas, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": match}, "spec": {
                "nodeSelector": {NODE_LABEL: node_label},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": labels.ZONE,
                                               "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": match}}],
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": f"{class_name}-{SUFFIX}",
                "resources": {"requests": {"storage": "1Gi"}}}}]}}


def collection(cp: ControlPlane, path: str, done: Callable[[Objects], bool], *, timeout: int = 90) -> Objects:
    """List ``path`` and follow it by a watch until ``done(objects by name)`` holds; fails after ``timeout``."""
    listed = cp.request("GET", path)
    objects = {o["metadata"]["name"]: o for o in listed["items"]}
    if done(objects):
        return objects
    version = listed["metadata"]["resourceVersion"]
    url = f"{cp.url}{path}?watch=true&resourceVersion={version}&timeoutSeconds={timeout}"
    with urllib.request.urlopen(urllib.request.Request(url), context=cp.ssl_context, timeout=timeout + 5) as stream:
        for line in stream:
            event = json.loads(line)
            obj = event["object"]
            if event["type"] == "DELETED":
                objects.pop(obj["metadata"]["name"], None)
            elif event["type"] in ("ADDED", "MODIFIED"):
                objects[obj["metadata"]["name"]] = obj
            if done(objects):
                return objects
    pytest.fail(f"{path}: not done within {timeout} s; last seen: {sorted(objects)}")


def failures(cp: ControlPlane, names: set[str]) -> dict[str, list[str]]:
    """Block until every claim in ``names`` has a ProvisioningFailed Event; their messages by claim."""
    def by_claim(events: Objects) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for event in events.values():
            if event["reason"] == "ProvisioningFailed" and event["involvedObject"]["name"] in names:
                found.setdefault(event["involvedObject"]["name"], []).append(event["message"])
        return found

    return by_claim(collection(cp, f"/api/v1/namespaces/{NAMESPACE}/events",
                               lambda events: set(by_claim(events)) == names))


def our_disks(cloud: FakeAzure) -> dict[str, dict[str, Any]]:
    """FakeArm's disks by name."""
    return {disk["name"]: disk for disk in cloud.arm.disks.values()}


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeAzure]:
    """FakeArm (no disks yet) and FakeImds's managed-identity endpoint."""
    with fake_azure(tmp_path_factory.mktemp("cp-provisioner")) as azure:
        yield azure


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane, deployment: cp_deploy.Deployment, cloud: FakeAzure) -> Iterator[ControlPlane]:
    """Our nodes, namespace and classes; on exit everything of ours goes, PVs and finalizers included."""
    control_plane.add_nodes([*NODES, UNZONED])
    control_plane.ensure_namespace(NAMESPACE)
    try:
        yield control_plane
    finally:
        control_plane.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        # No kubelet confirms a graceful deletion of a bound pod: remove them outright (see tests/cp_deploy.py).
        control_plane.kubectl("delete", "pods", "--all", "--force", "--grace-period=0", "--ignore-not-found",
                              "-n", NAMESPACE)
        for pv in control_plane.request("GET", "/api/v1/persistentvolumes")["items"]:
            if pv["spec"].get("storageClassName", "").endswith(SUFFIX):
                with contextlib.suppress(errors.KubeApiError):
                    control_plane.client.patch(kube.PERSISTENT_VOLUMES, pv["metadata"]["name"],
                                               {"metadata": {"finalizers": None}})
                    control_plane.client.delete(kube.PERSISTENT_VOLUMES, pv["metadata"]["name"])
        for sc in control_plane.request("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]:
            if sc["metadata"]["name"].endswith(SUFFIX):
                control_plane.client.delete(kube.STORAGE_CLASSES, sc["metadata"]["name"])
        for each in [*NODES, UNZONED]:
            control_plane.client.delete(kube.NODES, each["metadata"]["name"])


def provisioner(cp: ControlPlane, cloud: FakeAzure) -> Service:
    """``cloudzones provisioner`` as its service account; returns once it leads."""
    service = Service("provisioner", "--cloud-config", str(cloud.cloud_config), "--metrics-port", "0",
                      "--kubeconfig", cp.kubeconfig_for(SYSTEM, ACCOUNT), "--leader-election-namespace", SYSTEM,
                      "--leader-election-name", LEASE, env=cloud.env)
    service.wait_for("started leading", timeout=60)
    return service


@contextlib.contextmanager
def running(cp: ControlPlane, cloud: FakeAzure) -> Iterator[Service]:
    """A provisioner for the block; stopped by SIGTERM (so the next one takes the Lease at once), clean exit."""
    service = provisioner(cp, cloud)
    try:
        yield service
    finally:
        assert service.stop() == 0, service.log[-3000:]
        assert "Forbidden" not in service.log and " 403" not in service.log, service.log[-3000:]


def create(cp: ControlPlane, *objects: dict[str, Any]) -> None:
    """Create objects through the admin client."""
    for obj in objects:
        resource = {"StorageClass": kube.STORAGE_CLASSES, "PersistentVolumeClaim": kube.PERSISTENT_VOLUME_CLAIMS}
        if obj["kind"] in resource:
            cp.client.create(resource[obj["kind"]], obj)
        else:
            cp.request("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets", obj)


class TestStatefulSets:
    """The real binder binds, the real scheduler places, the zones balance."""

    def test_immediate_and_late_binding(self, cluster: ControlPlane, cloud: FakeAzure) -> None:
        """Three StatefulSets × three replicas: Bound, scheduled next to their disks, one disk per zone each."""
        create(cluster, storage_class("now"), storage_class("late", binding="WaitForFirstConsumer"),
               stateful_set("now", "now"), stateful_set("late", "late"), stateful_set("both", "late"))
        sets = ("now", "late", "both")
        with running(cluster, cloud):
            bound = collection(cluster, f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims", lambda c: sum(
                1 for o in c.values() if o["status"].get("phase") == "Bound" and o["metadata"]["name"].split("-")[1]
                in sets) == 9)
            pods = collection(cluster, f"/api/v1/namespaces/{NAMESPACE}/pods", lambda p: sum(
                1 for n, o in p.items() if o["spec"].get("nodeName") and n.split("-")[0] in sets) == 9)
        pods = {name: pod for name, pod in pods.items() if name.split("-")[0] in sets}
        volumes = {pv["metadata"]["name"]: pv for pv in cluster.request("GET", "/api/v1/persistentvolumes")["items"]}
        nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in NODES}
        zones_of: dict[str, list[str]] = {}
        for name, pod in pods.items():
            pvc = bound[f"data-{name}"]
            pv = volumes[pvc["spec"]["volumeName"]]
            zone = pv["metadata"]["labels"][labels.ZONE]
            assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
            assert pv["metadata"]["annotations"][claims.ANN_PROVISIONED_BY] == NAME
            assert claims.FINALIZER in pv["metadata"]["finalizers"]
            assert nodes[pod["spec"]["nodeName"]][labels.ZONE] == zone, (name, pod["spec"]["nodeName"], zone)
            assert our_disks(cloud)[pv["metadata"]["name"]]["zones"] == [zone[-1]]
            zones_of.setdefault(name.rsplit("-", 1)[0], []).append(zone)
        assert {s: sorted(z) for s, z in zones_of.items()} == {s: ZONES for s in sets}


class TestCrashes:
    """kill -9 at the worst moments, then a restart: nothing lost, nothing doubled, deletion exact."""

    def test_kill_and_restart(self, cluster: ControlPlane, cloud: FakeAzure) -> None:
        """After the disk PUT (reply never received) and after the PV create; then deletion by policy."""
        create(cluster, storage_class("crash"), storage_class("keep", reclaim="Retain"))
        held = cloud.arm.hold_next("PUT", "/disks/")
        first = provisioner(cluster, cloud)
        create(cluster, claim("first", "crash"))
        assert held.reached.wait(60), first.log[-2000:]
        first.stop(signal.SIGKILL)
        held.release()
        uid = cluster.client.get(kube.PERSISTENT_VOLUME_CLAIMS, "first", namespace=NAMESPACE)["metadata"]["uid"]
        assert f"pvc-{uid}" in our_disks(cloud)  # the disk exists; its provisioner died before it knew
        puts = cloud.arm.calls[("PUT", "disks")]

        second = provisioner(cluster, cloud)  # after the killed one's Lease expired
        collection(cluster, f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims",
                   lambda c: c.get("first", {}).get("status", {}).get("phase") == "Bound")
        assert cloud.arm.calls[("PUT", "disks")] == puts  # found, not created again
        create(cluster, claim("second", "crash"))
        collection(cluster, "/api/v1/persistentvolumes", lambda v: any(
            o["spec"].get("claimRef", {}).get("name") == "second" for o in v.values()))
        second.stop(signal.SIGKILL)

        with running(cluster, cloud):
            create(cluster, claim("kept", "keep"))
            claimed = collection(cluster, f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims", lambda c: all(
                c.get(n, {}).get("status", {}).get("phase") == "Bound" for n in ("first", "second", "kept")))
            names = {n: f"pvc-{claimed[n]['metadata']['uid']}" for n in ("first", "second", "kept")}
            ours = {name for name in our_disks(cloud) if name in names.values()}
            assert ours == set(names.values())  # one disk per claim, and only those
            assert sum(1 for pv in cluster.request("GET", "/api/v1/persistentvolumes")["items"]
                       if pv["metadata"]["name"] in names.values()) == 3
            for name in ("first", "second", "kept"):
                cluster.client.delete(kube.PERSISTENT_VOLUME_CLAIMS, name, namespace=NAMESPACE)
            left = collection(cluster, "/api/v1/persistentvolumes", lambda v: names["first"] not in v
                              and names["second"] not in v and v.get(names["kept"], {}).get("status", {}).get(
                                  "phase") == "Released")
        assert names["kept"] in left and names["kept"] in our_disks(cloud)
        assert names["first"] not in our_disks(cloud) and names["second"] not in our_disks(cloud)


BAD_CLASSES = {
    "unknown": ({"skuName": "Premium_LRS", "colour": "blue"}, "unknown-parameter"),
    "sku": ({"skuName": "Gold_LRS"}, "sku"),
    "caching": ({"cachingMode": "Sometimes"}, "caching-mode"),
    "region": ({"zone": "westus-1"}, "zone-format"),
    "both": ({"zone": "eastus-1", "zones": "eastus-2"}, "zone-and-zones"),
    "zrs": ({"skuName": "Premium_ZRS", "zone": "eastus-1"}, "zone-with-zone-redundant-sku"),
    "unzoned": ({"zoned": "false", "zone": "eastus-1"}, "zone-requires-zoned"),
    "zoned": ({"zoned": "maybe"}, "zoned-value"),
    "kind": ({"kind": "Blob"}, "kind"),
}


class TestRefusals:
    """Every rule a class can break leaves the claim Pending, says why once, and writes nothing to ARM."""

    def test_bad_classes(self, cluster: ControlPlane, cloud: FakeAzure) -> None:
        """One ProvisioningFailed per claim naming the rule; a pod on the unzoned node: the selected-node rule."""
        classes = [storage_class(f"bad-{key}", **parameters) for key, (parameters, _) in BAD_CLASSES.items()]
        create(cluster, *classes, *[claim(f"bad-{key}", f"bad-{key}") for key in BAD_CLASSES],
               storage_class("pinned", binding="WaitForFirstConsumer"),
               stateful_set("pinned", "pinned", node_label="unzoned", replicas=1))
        writes = cloud.arm.calls[("PUT", "disks")]
        with running(cluster, cloud):
            said = failures(cluster, {f"bad-{key}" for key in BAD_CLASSES} | {"data-pinned-0"})
        for key, (_, rule) in BAD_CLASSES.items():
            assert len(said[f"bad-{key}"]) == 1 and f"rule {rule!r}" in said[f"bad-{key}"][0], said[f"bad-{key}"]
        assert all("rule 'selected-node'" in message for message in said["data-pinned-0"]), said["data-pinned-0"]
        assert cloud.arm.calls[("PUT", "disks")] == writes
        pending = cluster.request("GET", f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims")["items"]
        assert all(c["status"]["phase"] == "Pending" for c in pending if c["metadata"]["name"].startswith(
            ("bad-", "data-pinned")))
