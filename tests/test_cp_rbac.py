"""Least privilege is enough, and no more: every service does its job with deploy/'s RBAC on a real API server.

deploy/ (with the annotator) is applied server side (tests/cp_deploy.py). The controller (with
``--annotate-pods`` and leader election in cloudzones-system, as deployed) and the node agent run as
processes with bound tokens of their own service accounts, never admin; the webhook runs with no
Kubernetes credentials at all, as deployed. They label nodes, take the Lease, post Events and
annotate pods, and none of their logs mentions a 403. Then the API server's own authorizer says
what each account is refused.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import errors, kube, labels
from cloudzones.testing.controlplane import ControlPlane, free_port
from cloudzones.testing.tls import make_tls_files
from tests import cp_deploy
from tests.cp_deploy import CONTROLLER, NAMESPACE, NODE_AGENT, WEBHOOK
from tests.processes import REGION, RESOURCE_GROUP, SUBSCRIPTION, FakeAzure, Service, fake_azure

PROVISIONER = "cloudzones-provisioner"

deployment = cp_deploy.deployment  # the module-scoped fixture, shared with test_cp_deploy
SUFFIX = uuid.uuid4().hex[:6]
PREFIX = f"cp-rbac-{SUFFIX}"
"""Unique node names: the controller labels every node of the shared cluster; assertions are on ours."""
LABELLED = {f"{PREFIX}-{i}": str(i % 3 + 1) for i in range(1, 6)}
"""Nodes with a VM in FakeArm, and the VM's zone."""
LOST = f"{PREFIX}-lost"
"""A node whose VM is missing from FakeArm: the controller cannot resolve it."""
AGENT, AGENT_LOST = f"{PREFIX}-agent", f"{PREFIX}-agent-lost"
"""Nodes without a providerID (the controller skips them) for the node agent; the second has no IMDS document."""
PODS_NAMESPACE = PREFIX
SELECTOR = "cloudzones.io/zone-injection=enabled"
DISK = f"{PREFIX}-disk"
DISK_URI = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Compute/disks/{DISK}"


def no_forbidden(service: Service) -> None:
    """Assert that the process never logged a 403 (a right missing from deploy/'s RBAC)."""
    # Not inside a number or a name: ports, the milliseconds of the timestamps and the random hex of
    # the leader identity ("vm_9c403a8f") may contain "403".
    assert not re.search(r"(?<![\w,.:])403(?!\w)", service.log), service.log[-3000:]
    assert "forbidden" not in service.log.lower(), service.log[-3000:]


def closed(service: Service) -> int:
    """Stop ``service`` and close its stderr pipe (left to the GC it is a ResourceWarning, an error here)."""
    code = service.stop()
    assert service.process.stderr is not None
    service.process.stderr.close()
    return code


def event_about(cp: ControlPlane, node: str, component: str) -> dict[str, Any]:
    """Block until an Event about ``node`` from ``component`` is posted in "default" (fails after 30 s)."""
    found = cp.watch_until("/api/v1/namespaces/default/events", lambda e: (
        e["involvedObject"].get("name") == node and e["source"].get("component") == component))
    assert found is not None, f"no Event from {component} about {node}"
    return found


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeAzure]:
    """FakeArm with our labelled nodes' VMs and a zoned disk; FakeImds with the node agent's machine."""
    with fake_azure(tmp_path_factory.mktemp("cp-rbac-azure")) as azure:
        for vm, zone in LABELLED.items():
            azure.arm.add_vm(vm, zone=zone)
        azure.imds.add_machine(AGENT, location=REGION, zone="3")
        body = {"location": REGION, "zones": ["2"], "sku": {"name": "Premium_LRS"}, "properties": {"diskSizeGB": 8}}
        assert azure.arm.handle("PUT", DISK_URI, {}, json.dumps(body).encode())[0] == 200
        yield azure


@pytest.fixture(scope="module")
def nodes(control_plane: ControlPlane, deployment: cp_deploy.Deployment, cloud: FakeAzure) -> Iterator[None]:
    """Our nodes (removed afterwards); the controller's have a providerID, the node agent's do not."""
    with_vm = [{"metadata": {"name": name}, "spec": {"providerID": cloud.provider_id(name)}}
               for name in (*LABELLED, LOST)]
    control_plane.add_nodes([*with_vm, {"metadata": {"name": AGENT}}, {"metadata": {"name": AGENT_LOST}}])
    try:
        yield
    finally:
        for name in (*LABELLED, LOST, AGENT, AGENT_LOST):
            control_plane.client.delete(kube.NODES, name)


@pytest.fixture(scope="module")
def controller(control_plane: ControlPlane, cloud: FakeAzure, nodes: None) -> Iterator[Service]:
    """``cloudzones controller --annotate-pods``, as the controller's service account, electing in cloudzones-system."""
    control_plane.ensure_namespace(PODS_NAMESPACE)
    service = Service("controller", "--cloud-config", str(cloud.cloud_config), "--metrics-port", "0",
                      "--kubeconfig", control_plane.kubeconfig_for(NAMESPACE, CONTROLLER),
                      "--leader-election-namespace", NAMESPACE, "--annotate-pods", SELECTOR, env=cloud.env)
    try:
        service.wait_for("started leading")
        yield service
    finally:
        assert closed(service) == 0, service.log[-2000:]
        control_plane.request("DELETE", f"/api/v1/namespaces/{PODS_NAMESPACE}")


def node_agent(cp: ControlPlane, cloud: FakeAzure, node: str) -> Service:
    """``cloudzones node-agent`` for ``node`` as the node agent's service account, reading FakeImds."""
    return Service("node-agent", "--node-name", node, "--imds-url", cloud.imds.url_for(node), "--metrics-port", "0",
                   "--kubeconfig", cp.kubeconfig_for(NAMESPACE, NODE_AGENT), env=cloud.env)


class TestController:
    """The controller labels, leads, reports and annotates with its service account's rights."""

    def test_labels_every_node(self, control_plane: ControlPlane, controller: Service) -> None:
        """All five nodes get their VM's zone and the region; nothing was forbidden."""
        for name, zone in LABELLED.items():
            found = control_plane.watch_until("/api/v1/nodes", lambda n, name=name: (
                n["metadata"]["name"] == name and labels.ZONE in n["metadata"].get("labels", {})))
            assert found is not None, f"node {name} was never labelled"
            assert (found["metadata"]["labels"][labels.ZONE], found["metadata"]["labels"][labels.REGION]) == (
                f"{REGION}-{zone}", REGION)
        no_forbidden(controller)

    def test_holds_the_lease(self, control_plane: ControlPlane, controller: Service) -> None:
        """The Lease in cloudzones-system names the identity the process logged as leading."""
        identity = controller.wait_for("started leading").split(" started leading")[0].rsplit(" ", 1)[-1]
        lease = control_plane.client.get(kube.LEASES, "cloudzones-controller", namespace=NAMESPACE)
        assert lease["spec"]["holderIdentity"] == identity
        no_forbidden(controller)

    def test_event_for_unresolvable_node(self, control_plane: ControlPlane, controller: Service) -> None:
        """A node whose VM is missing gets a Warning ZoneUnresolved Event and stays unlabelled."""
        event = event_about(control_plane, LOST, "cloudzones-controller")
        assert (event["type"], event["reason"], event["involvedObject"]["kind"]) == ("Warning", "ZoneUnresolved", "Node")
        assert labels.ZONE not in control_plane.client.get(kube.NODES, LOST)["metadata"].get("labels", {})
        no_forbidden(controller)

    def test_annotates_bound_pod(self, control_plane: ControlPlane, controller: Service) -> None:
        """A selected pod bound to a labelled node gets the node's zone annotations."""
        name, zone = next(iter(LABELLED.items()))
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "selected", "labels": dict([SELECTOR.split("=")])},
               "spec": {"nodeName": name, "containers": [{"name": "main", "image": "busybox:1.36"}]}}
        control_plane.client.create(kube.PODS, pod, namespace=PODS_NAMESPACE)
        found = control_plane.watch_until(f"/api/v1/namespaces/{PODS_NAMESPACE}/pods", lambda p: (
            p["metadata"].get("annotations", {}).get(labels.ZONE) == f"{REGION}-{zone}"))
        assert found is not None, "the pod was never annotated"
        assert found["metadata"]["annotations"][labels.POD_ZONES] == f"{REGION}-{zone}_{REGION}"
        no_forbidden(controller)


class TestNodeAgent:
    """The node agent labels its own node and reports failures with its service account's rights."""

    def test_labels_own_node(self, control_plane: ControlPlane, cloud: FakeAzure, nodes: None) -> None:
        """The agent writes its IMDS zone onto its node; nothing was forbidden."""
        agent = node_agent(control_plane, cloud, AGENT)
        try:
            agent.wait_for(f"labelled node {AGENT}")
            node = control_plane.client.get(kube.NODES, AGENT)
            assert node["metadata"]["labels"][labels.ZONE] == f"{REGION}-3"
        finally:
            assert closed(agent) == 0
        no_forbidden(agent)

    def test_event_when_imds_fails(self, control_plane: ControlPlane, cloud: FakeAzure, nodes: None) -> None:
        """With no IMDS document the agent posts a Warning Event on its node (events/create in "default")."""
        agent = node_agent(control_plane, cloud, AGENT_LOST)
        try:
            event = event_about(control_plane, AGENT_LOST, "cloudzones-node-agent")
            assert (event["type"], event["reason"]) == ("Warning", "ZoneUnresolved")
        finally:
            assert closed(agent) == 0
        no_forbidden(agent)


class TestWebhook:
    """The webhook needs no Kubernetes credentials at all."""

    def test_labels_without_credentials(self, cloud: FakeAzure, tmp_path_factory: pytest.TempPathFactory) -> None:
        """Run without a kubeconfig or token, it answers a PV review with the disk's zone labels."""
        tls = make_tls_files(tmp_path_factory.mktemp("cp-rbac-webhook-tls"))
        port = free_port()
        hook = Service("webhook", "--cloud-config", str(cloud.cloud_config), "--tls-cert-file", str(tls.cert_file),
                       "--tls-key-file", str(tls.key_file), "--address", "127.0.0.1", "--port", str(port),
                       env={**cloud.env, "KUBECONFIG": "/nonexistent"})
        try:
            hook.wait_for("webhook serving on")
            pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": DISK},
                  "spec": {"capacity": {"storage": "8Gi"}, "accessModes": ["ReadWriteOnce"],
                           "azureDisk": {"diskName": DISK, "diskURI": DISK_URI, "kind": "Managed"}}}
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                      "request": {"uid": "u1", "operation": "CREATE", "object": pv,
                                  "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"}}}
            request = urllib.request.Request(f"https://127.0.0.1:{port}/mutate-pv", data=json.dumps(review).encode(),
                                             headers={"Content-Type": "application/json"})
            context = ssl.create_default_context(cafile=str(tls.ca_file))
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                response = json.load(answer)["response"]
        finally:
            assert closed(hook) == 0
        assert response["allowed"] is True
        patch = json.loads(base64.b64decode(response["patch"]))
        assert f"{REGION}-2" in json.dumps(patch)
        no_forbidden(hook)


# (account, verb, resource[/subresource], namespace or "", allowed): what the API server's authorizer must answer.
RIGHTS = [
    (CONTROLLER, "patch", "nodes", "", True),
    (CONTROLLER, "watch", "nodes", "", True),
    (CONTROLLER, "delete", "nodes", "", False),
    (CONTROLLER, "patch", "nodes/status", "", False),
    (CONTROLLER, "get", "secrets", NAMESPACE, False),
    (CONTROLLER, "list", "secrets", "kube-system", False),
    (CONTROLLER, "update", "leases", NAMESPACE, True),
    (CONTROLLER, "update", "leases", "kube-system", False),
    (CONTROLLER, "delete", "leases", NAMESPACE, False),
    (CONTROLLER, "patch", "pods", "default", True),  # the annotator's overlay is applied
    (CONTROLLER, "create", "pods", "default", False),
    (CONTROLLER, "delete", "pods", "default", False),
    (CONTROLLER, "create", "events", "default", True),
    (CONTROLLER, "create", "events", PODS_NAMESPACE, True),  # Events on pods, the annotator's
    (NODE_AGENT, "get", "nodes", "", True),
    (NODE_AGENT, "patch", "nodes", "", True),
    (NODE_AGENT, "list", "nodes", "", False),
    (NODE_AGENT, "list", "pods", "", False),
    (NODE_AGENT, "create", "events", "default", True),
    (NODE_AGENT, "create", "events", NAMESPACE, False),
    (NODE_AGENT, "get", "leases", NAMESPACE, False),
    (NODE_AGENT, "get", "secrets", NAMESPACE, False),
    (WEBHOOK, "get", "nodes", "", False),
    (WEBHOOK, "get", "persistentvolumes", "", False),
    (WEBHOOK, "create", "events", "default", False),
    (WEBHOOK, "get", "secrets", NAMESPACE, False),
    (PROVISIONER, "create", "persistentvolumes", "", True),
    (PROVISIONER, "delete", "persistentvolumes", "", True),
    (PROVISIONER, "update", "persistentvolumes", "", False),
    (PROVISIONER, "patch", "persistentvolumeclaims", PODS_NAMESPACE, True),
    (PROVISIONER, "delete", "persistentvolumeclaims", PODS_NAMESPACE, False),
    (PROVISIONER, "get", "persistentvolumeclaims", PODS_NAMESPACE, False),  # the informer lists; nothing gets
    (PROVISIONER, "list", "storageclasses.storage.k8s.io", "", True),
    (PROVISIONER, "create", "storageclasses.storage.k8s.io", "", False),
    (PROVISIONER, "patch", "nodes", "", False),
    (PROVISIONER, "create", "events", PODS_NAMESPACE, True),
    (PROVISIONER, "update", "leases", NAMESPACE, True),
    (PROVISIONER, "get", "leases", "default", False),
    (PROVISIONER, "get", "secrets", NAMESPACE, False),
]


class TestRefusals:
    """The real authorizer grants each account exactly its job: what it needs, and refusals beside it."""

    @pytest.mark.parametrize("right", RIGHTS, ids=[f"{a.removeprefix('cloudzones-')}-{v}-{r}-{n or 'cluster'}"
                                                   for a, v, r, n, _ in RIGHTS])
    def test_can_i(self, control_plane: ControlPlane, deployment: cp_deploy.Deployment,
                   right: tuple[str, str, str, str, bool]) -> None:
        """``kubectl auth can-i --as=<the account>`` answers as the table says."""
        account, verb, resource, namespace, allowed = right
        resource, _, subresource = resource.partition("/")
        # "nodes/status" would be read as the node named "status": the subresource has its own flag.
        scope = (["-n", namespace] if namespace else []) + ([f"--subresource={subresource}"] if subresource else [])
        answer = control_plane.kubectl("auth", "can-i", verb, resource, *scope,
                                       f"--as=system:serviceaccount:{NAMESPACE}:{account}", check=False)
        assert answer.stdout.strip() == ("yes" if allowed else "no"), answer.stderr

    def test_tokens_are_refused(self, control_plane: ControlPlane, deployment: cp_deploy.Deployment) -> None:
        """With real bound tokens: the node agent cannot list pods, the controller cannot delete a node."""
        agent = kube.KubeClient.from_kubeconfig(control_plane.kubeconfig_for(NAMESPACE, NODE_AGENT))
        ours = kube.KubeClient.from_kubeconfig(control_plane.kubeconfig_for(NAMESPACE, CONTROLLER))
        try:
            with pytest.raises(errors.KubeApiError) as refused:
                agent.list(kube.PODS, namespace="default")
            assert refused.value.status == 403
            with pytest.raises(errors.KubeApiError) as refused:
                ours.delete(kube.NODES, f"{PREFIX}-never-created")
            assert refused.value.status == 403  # refused before the server even looks for it
        finally:
            agent.close()
            ours.close()
