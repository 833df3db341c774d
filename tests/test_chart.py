"""charts/cloudzones: lint, render, the same objects as kustomize, RBAC as the code calls, on the real API server.

The chart renders deploy/'s own manifests (through ``files/deploy``, a link to deploy/) with the values
applied, so the comparison with kustomize is exact: the default values render what ``deploy/`` does
(the Namespace aside: Helm installs into the release namespace), provisioner + annotator render
``with-provisioner`` ∪ ``with-annotator``. helm comes from ``scripts/helm build`` (helm.sh/helm/v3 from
the Go module proxy); without it the tests skip, and ``CLOUDZONES_REQUIRE_HELM=1`` (set by `.ci/run`)
turns that skip into a failure.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from cloudzones.testing.controlplane import ControlPlane
from tests import cp_deploy
from tests.manifests import build, containers
from tests.test_deploy_manifests import (
    ANNOTATOR_MODULES,
    CONTROLLER,
    PROVISIONER,
    PROVISIONER_MODULES,
    SERVICE_ACCOUNT_MODULES,
    granted,
    used_by,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "cloudzones"
DEPLOY = ROOT / "deploy"
NAMESPACE = "cloudzones-system"
FULL = {"image": {"repository": "registry.example/cloudzones", "tag": "1.2.3", "pullPolicy": "Always"},
        "cloudConfig": {"create": True, "azureJson": '{"cloud": "AzurePublicCloud"}'},
        "controller": {"replicas": 3, "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}},
                       "annotatePods": {"enabled": True}},
        "provisioner": {"enabled": True}, "webhook": {"certificate": "self-signed"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "agentpool", "operator": "In",
                                                               "values": ["system"]}]}}]}},
        "priorityClassName": "system-cluster-critical", "serviceMonitor": {"enabled": True}}

Objects = dict[tuple[str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def helm() -> str:
    """The helm binary."""
    answer = subprocess.run([str(ROOT / "scripts" / "helm"), "path"], capture_output=True, text=True, check=False)
    if answer.returncode == 0:
        return answer.stdout.strip()
    if os.environ.get("CLOUDZONES_REQUIRE_HELM") == "1":
        pytest.fail("CLOUDZONES_REQUIRE_HELM=1 but no helm: run scripts/helm build", pytrace=False)
    pytest.skip("no helm: run scripts/helm build")


def run(helm: str, *args: str, values: dict[str, Any] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """helm ARGS, values given as a file."""
    extra: list[str] = []
    if values is not None:
        extra = ["--values", "-"]
    answer = subprocess.run([helm, *args, *extra], capture_output=True, text=True, check=False,
                            input=json.dumps(values) if values is not None else None)
    if check:
        assert answer.returncode == 0, answer.stderr
    return answer


def render(helm: str, values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The objects ``helm template`` prints."""
    out = run(helm, "template", "cz", str(CHART), "--namespace", namespace, values=values).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def keyed(docs: list[dict[str, Any]]) -> Objects:
    """Objects by (kind, name), the Namespace left out."""
    return {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] != "Namespace"}


class TestRender:
    """What the chart prints."""

    def test_lint(self, helm: str) -> None:
        """helm lint passes with the default and with a full set of values."""
        run(helm, "lint", str(CHART))
        run(helm, "lint", str(CHART), values=FULL)

    def test_default_is_deploy(self, helm: str) -> None:
        """The default values render exactly deploy/'s objects."""
        assert keyed(render(helm)) == keyed(build(DEPLOY))

    def test_components_are_the_overlays(self, helm: str) -> None:
        """Provisioner and annotator on: with-provisioner's objects and with-annotator's, together."""
        chart = keyed(render(helm, {"provisioner": {"enabled": True}, "controller": {"annotatePods": {"enabled": True}}}))
        kustomize = keyed(build(DEPLOY / "with-provisioner")) | keyed(build(DEPLOY / "with-annotator"))
        assert chart == kustomize

    def test_rbac_is_what_the_code_calls(self, helm: str) -> None:
        """Every account's rights, all components on: exactly its modules' calls (the deploy/ test's rule)."""
        docs = render(helm, {"provisioner": {"enabled": True}, "controller": {"annotatePods": {"enabled": True}}})
        assert granted(docs, CONTROLLER) == used_by(SERVICE_ACCOUNT_MODULES[CONTROLLER] + ANNOTATOR_MODULES)
        assert granted(docs, PROVISIONER) == used_by(PROVISIONER_MODULES)
        for account in set(SERVICE_ACCOUNT_MODULES) - {CONTROLLER}:
            assert granted(docs, account) == used_by(SERVICE_ACCOUNT_MODULES[account])

    def test_values_applied(self, helm: str) -> None:
        """Image, replicas, resources, scheduling and the priority class reach every workload; secrets made."""
        docs = keyed(render(helm, FULL))
        workloads = [d for d in docs.values() if d["kind"] in ("Deployment", "DaemonSet")]
        assert len(workloads) == 4
        for workload in workloads:
            pod = workload["spec"]["template"]["spec"]
            (container,) = containers(workload)
            assert (container["image"], container["imagePullPolicy"]) == ("registry.example/cloudzones:1.2.3", "Always")
            assert pod["nodeSelector"]["kubernetes.io/os"] == "linux" and FULL["tolerations"][0] in pod["tolerations"]
            assert pod["affinity"] == FULL["affinity"] and pod["priorityClassName"] == "system-cluster-critical"
        controller = docs[("Deployment", CONTROLLER)]
        assert controller["spec"]["replicas"] == 3
        assert containers(controller)[0]["resources"] == FULL["controller"]["resources"]
        assert "--annotate-pods=cloudzones.io/zone-injection=enabled" in containers(controller)[0]["args"]
        assert {"operator": "Exists"} in docs[("DaemonSet", "cloudzones-node-agent")]["spec"]["template"]["spec"][
            "tolerations"]  # the node agent's own toleration is kept
        assert docs[("Secret", "azure-cloud-config")]["stringData"]["azure.json"] == FULL["cloudConfig"]["azureJson"]
        assert ("ServiceMonitor", "cloudzones") in docs

    def test_self_signed(self, helm: str) -> None:
        """self-signed: a TLS Secret for the Service's name and its CA in the webhook configuration; no cert-manager."""
        docs = keyed(render(helm, {"webhook": {"certificate": "self-signed"}}))
        assert not [k for k in docs if k[0] in ("Certificate", "Issuer")]
        secret = docs[("Secret", "cloudzones-webhook-tls")]
        assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"tls.crt", "tls.key"}
        hook = docs[("MutatingWebhookConfiguration", "cloudzones-pv-labels")]
        assert "annotations" not in hook["metadata"] and hook["webhooks"][0]["clientConfig"]["caBundle"]

    def test_release_namespace(self, helm: str) -> None:
        """Another namespace replaces cloudzones-system everywhere; Events about nodes stay in default."""
        docs = render(helm, namespace="zones")
        text = json.dumps(docs)
        assert "cloudzones-system" not in text
        for doc in docs:
            namespace = doc["metadata"].get("namespace")
            assert namespace in (None, "zones") or doc["metadata"]["name"] == "cloudzones-node-events", doc
        hook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")
        assert hook["webhooks"][0]["clientConfig"]["service"]["namespace"] == "zones"

    @pytest.mark.parametrize(("values", "says"), [
        ({"controler": {"enabled": False}}, "additional properties 'controler' not allowed"),
        ({"webhook": {"certificate": "selfsigned"}}, "value must be one of 'cert-manager', 'self-signed'"),
        ({"controller": {"replicas": 0}}, "minimum"),
        ({"image": {"pullPolicy": "Sometimes"}}, "value must be one of"),
    ])
    def test_typos_refused(self, helm: str, values: dict[str, Any], says: str) -> None:
        """values.schema.json: a misspelt or impossible value fails the install with its place."""
        answer = run(helm, "template", "cz", str(CHART), values=values, check=False)
        assert answer.returncode != 0 and says in answer.stderr, answer.stderr

    def test_create_needs_the_json(self, helm: str) -> None:
        """cloudConfig.create without azureJson is refused, saying so."""
        answer = run(helm, "template", "cz", str(CHART), values={"cloudConfig": {"create": True}}, check=False)
        assert answer.returncode != 0 and "cloudConfig.azureJson is required" in answer.stderr


@pytest.fixture(scope="module")
def chart_namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A release namespace of this module, with cert-manager's CRDs stubbed (removed afterwards)."""
    namespace = f"cz-chart-{uuid.uuid4().hex[:6]}"
    crds = cp_deploy.CRDS.read_text(encoding="utf-8")
    control_plane.kubectl("apply", "--server-side", "-f", "-", input=crds)
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=30s",
                          "crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io")
    control_plane.ensure_namespace(namespace)
    yield namespace
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")


class TestOnTheApiServer:
    """The rendered chart applies to the real API server."""

    @pytest.mark.parametrize("values", [None, {"provisioner": {"enabled": True}, "webhook": {"certificate": "self-signed"},
                                               "controller": {"annotatePods": {"enabled": True}}}],
                             ids=["default", "everything"])
    def test_server_side_apply(self, helm: str, control_plane: ControlPlane, chart_namespace: str,
                               values: dict[str, Any] | None) -> None:
        """Every object accepted server-side with no warning; then removed."""
        manifests = run(helm, "template", "cz", str(CHART), "--namespace", chart_namespace, values=values).stdout
        try:
            answer = control_plane.kubectl("apply", "--server-side", "--field-manager=helm-test", "-f", "-",
                                           input=manifests, check=False)
            assert (answer.returncode, answer.stderr) == (0, ""), answer.stderr
            assert answer.stdout.count("serverside-applied") == len([d for d in yaml.safe_load_all(manifests) if d])
        finally:
            control_plane.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=manifests)
