"""deploy/ is real: the real kube-apiserver (v1.37.2) accepts every object, without a warning.

``deploy/`` and ``deploy/with-annotator/`` are rendered by the kustomize inside the pinned kubectl
and applied server side (tests/cp_deploy.py), cert-manager's CRDs stubbed. Beyond the apply, the
real server checks what the offline tests of tests/test_deploy_manifests.py cannot: every
workload's pod passes the namespace's ``restricted`` Pod Security enforcement, the Deployments'
ReplicaSets create pods, the RBAC is stored as written, and the examples are accepted.
"""

from __future__ import annotations

import copy
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from cloudzones.testing.controlplane import ControlPlane
from tests import cp_deploy
from tests.cp_deploy import CONTROLLER, DEPLOY, NAMESPACE, NODE_AGENT, OVERLAYS, WEBHOOK, Deployment

deployment = cp_deploy.deployment  # the module-scoped fixture, shared with test_cp_rbac
EXAMPLES = sorted((DEPLOY / "examples").glob("*.yaml"))
WORKLOADS = [("Deployment", CONTROLLER), ("DaemonSet", NODE_AGENT), ("Deployment", WEBHOOK),
             ("Deployment", "cloudzones-provisioner")]
EXAMPLE_NAMESPACE = "cp-deploy-examples"


def template_pod(deployment: Deployment, kind: str, name: str) -> dict[str, Any]:
    """A Pod built from workload ``kind/name``'s template (from the overlay that has it), as its controller would."""
    workload = next(d for overlay in reversed(OVERLAYS) for d in deployment.objects(overlay)
                    if d["kind"] == kind and d["metadata"]["name"] == name)
    template = copy.deepcopy(workload["spec"]["template"])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {**template["metadata"], "name": f"{name}-template", "namespace": NAMESPACE},
            "spec": template["spec"]}


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A namespace of this module for the examples' dry runs (removed afterwards)."""
    control_plane.ensure_namespace(EXAMPLE_NAMESPACE)
    yield EXAMPLE_NAMESPACE
    control_plane.request("DELETE", f"/api/v1/namespaces/{EXAMPLE_NAMESPACE}")


class TestApply:
    """Both overlays apply server side, each object accepted, no warning."""

    @pytest.mark.parametrize("what", ["crds", *OVERLAYS])
    def test_no_error_no_warning(self, deployment: Deployment, what: str) -> None:
        """kubectl exits 0 with nothing on stderr (the API server's warnings would be printed there)."""
        answer = deployment.applied[what]
        assert (answer.returncode, answer.stderr) == (0, "")

    @pytest.mark.parametrize("overlay", OVERLAYS)
    def test_every_object_applied(self, deployment: Deployment, overlay: str) -> None:
        """kubectl reports every rendered object as applied, and nothing else."""
        objects = deployment.objects(overlay)
        reported = {line.split(" ")[0].split("/", 1)[1] for line in deployment.applied[overlay].stdout.splitlines()}
        assert reported == {o["metadata"]["name"] for o in objects}
        assert deployment.applied[overlay].stdout.count("serverside-applied") == len(objects)

    def test_reapply_is_a_no_op(self, control_plane: ControlPlane, deployment: Deployment) -> None:
        """Applying with-annotator again changes nothing: a server-side dry-run diff is empty."""
        answer = control_plane.kubectl("diff", "--server-side", "-f", "-", input=deployment.rendered[OVERLAYS[-1]],
                                       check=False)
        assert (answer.returncode, answer.stdout, answer.stderr) == (0, "", "")

    def test_stored_as_written(self, control_plane: ControlPlane, deployment: Deployment) -> None:
        """The server kept the RBAC rules and the webhook's rules exactly as rendered (no field was dropped)."""
        for obj in deployment.objects(OVERLAYS[-1]):
            if obj["kind"] not in ("ClusterRole", "Role", "MutatingWebhookConfiguration"):
                continue
            namespace = ["-n", obj["metadata"]["namespace"]] if obj["metadata"].get("namespace") else []
            stored = json.loads(control_plane.kubectl("get", obj["kind"], obj["metadata"]["name"], *namespace,
                                                      "-o", "json").stdout)
            if obj["kind"] == "MutatingWebhookConfiguration":
                (hook,), (want,) = stored["webhooks"], obj["webhooks"]
                assert {k: hook.get(k) for k in want} == want
            else:
                assert stored["rules"] == obj["rules"], obj["metadata"]["name"]


class TestWorkloads:
    """The workloads' pods are what the real server admits in cloudzones-system."""

    def test_namespace_enforces_restricted(self, control_plane: ControlPlane, deployment: Deployment) -> None:
        """The namespace carries restricted enforcement: a privileged pod is refused there."""
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "privileged", "namespace": NAMESPACE},
               "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                        "securityContext": {"privileged": True}}]}}
        answer = control_plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
        assert answer.returncode != 0 and 'violates PodSecurity "restricted' in answer.stderr

    @pytest.mark.parametrize(("kind", "name"), WORKLOADS, ids=[n for _, n in WORKLOADS])
    def test_template_pod_admitted(self, control_plane: ControlPlane, deployment: Deployment,
                                   kind: str, name: str) -> None:
        """A pod from each template passes admission (restricted Pod Security included) with no warning."""
        answer = control_plane.kubectl("create", "--dry-run=server", "-f", "-",
                                       input=json.dumps(template_pod(deployment, kind, name)), check=False)
        assert (answer.returncode, answer.stderr) == (0, ""), answer.stderr
        assert answer.stdout.strip() == f"pod/{name}-template created (server dry run)"

    @pytest.mark.parametrize("name", [CONTROLLER, WEBHOOK])
    def test_replicaset_creates_pods(self, control_plane: ControlPlane, deployment: Deployment, name: str) -> None:
        """The controller manager's ReplicaSet creates the Deployment's pods, with its service account."""
        component = name.removeprefix("cloudzones-")
        found = control_plane.watch_until(f"/api/v1/namespaces/{NAMESPACE}/pods", lambda p: (
            p["metadata"]["labels"].get("app.kubernetes.io/component") == component))
        assert found is not None, f"no pod of {name} was created"
        assert found["spec"]["serviceAccountName"] == name
        # The webhook mounts no token; the controller gets the projected one the API server adds.
        projected = [v for v in found["spec"]["volumes"] if "projected" in v]
        assert bool(projected) == (name == CONTROLLER)

    def test_service_accounts(self, control_plane: ControlPlane, deployment: Deployment) -> None:
        """The three service accounts exist; only the webhook's opts out of token automounting."""
        listed = control_plane.request("GET", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts")["items"]
        accounts = {a["metadata"]["name"]: a for a in listed}
        assert {CONTROLLER, NODE_AGENT, WEBHOOK} <= set(accounts)
        assert [n for n in (CONTROLLER, NODE_AGENT, WEBHOOK) if accounts[n].get("automountServiceAccountToken")
                is False] == [WEBHOOK]


class TestExamples:
    """deploy/examples/*.yaml are accepted by the real server."""

    @pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
    def test_server_side_dry_run(self, control_plane: ControlPlane, namespace: str, example: pathlib.Path) -> None:
        """A server-side apply dry run accepts every object of the example, with no warning."""
        objects = [d for d in yaml.safe_load_all(example.read_text()) if d]
        answer = control_plane.kubectl("apply", "--server-side", "--dry-run=server", "-n", namespace,
                                       "-f", str(example), check=False)
        assert (answer.returncode, answer.stderr) == (0, ""), answer.stderr
        assert answer.stdout.count("serverside-applied (server dry run)") == len(objects) > 0
