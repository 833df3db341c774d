"""deploy/ on the real control plane, for tests/test_cp_deploy.py and tests/test_cp_rbac.py.

`deployed` renders ``deploy/`` and ``deploy/with-annotator/`` with ``kubectl kustomize`` and applies
them server side (after stand-ins for cert-manager's CRDs, ``tests/data/cert-manager-crds.yaml``),
keeping what kubectl said; on exit it deletes everything it applied and waits until it is gone, so
the fixed namespace ``cloudzones-system`` and the cluster-scoped objects (ClusterRoles, bindings,
the MutatingWebhookConfiguration, the CRDs) do not outlive the module that asked for them. The
module-scoped fixture `deployment` is shared by both test modules (import it); with pytest-randomly
shuffling modules, module scope is what keeps one module's cleanup from pulling deploy/ out from
under the other.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import yaml

from cloudzones.testing.controlplane import ControlPlane
from tests.processes import ROOT

DEPLOY = ROOT / "deploy"
OVERLAYS = ("deploy", "deploy/with-provisioner", "deploy/with-annotator")
"""What ``kubectl apply -k`` is documented for, in the order applied (the second is a superset)."""
CRDS = ROOT / "tests/data/cert-manager-crds.yaml"
NAMESPACE = "cloudzones-system"
CONTROLLER, NODE_AGENT, WEBHOOK = "cloudzones-controller", "cloudzones-node-agent", "cloudzones-webhook"


@dataclasses.dataclass
class Deployment:
    """What was applied: each overlay's rendered YAML and kubectl's answers (CRDs under ``"crds"``)."""

    rendered: dict[str, str] = dataclasses.field(default_factory=dict)
    applied: dict[str, subprocess.CompletedProcess[str]] = dataclasses.field(default_factory=dict)

    def objects(self, overlay: str) -> list[dict[str, Any]]:
        """The objects of one rendered overlay."""
        return [doc for doc in yaml.safe_load_all(self.rendered[overlay]) if doc]


def render(cp: ControlPlane, overlay: str) -> str:
    """``kubectl kustomize <overlay>`` (the kustomize built into the pinned kubectl)."""
    return cp.kubectl("kustomize", str(ROOT / overlay)).stdout


def apply(cp: ControlPlane, manifests: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``kubectl apply --server-side -f -``; not checked, so that a test can read the refusal or warnings."""
    return cp.kubectl("apply", "--server-side", *extra, "-f", "-", input=manifests, check=False)


def remove(cp: ControlPlane, manifests: str) -> None:
    """Delete what ``manifests`` names and wait until it is gone (the namespace takes a few seconds)."""
    cp.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=manifests)
    # The Deployments' pods may have been bound to a node, and with no kubelet to confirm a graceful
    # deletion they would hold the namespace in Terminating for good: remove them outright. The
    # namespace is Terminating already, so no ReplicaSet can create new ones behind our back.
    cp.kubectl("delete", "pods", "--all", "--force", "--grace-period=0", "--ignore-not-found", "-n", NAMESPACE)
    cp.kubectl("delete", "--ignore-not-found", "--wait=true", "--timeout=90s", "-f", "-", input=manifests)


@contextmanager
def deployed(cp: ControlPlane) -> Iterator[Deployment]:
    """deploy/ (both overlays) applied to ``cp`` until the block ends; see the module docstring."""
    crds = CRDS.read_text(encoding="utf-8")
    result = Deployment()
    try:
        result.applied["crds"] = apply(cp, crds)
        # A custom resource is refused until its CRD is Established; wait for that, not a while.
        cp.kubectl("wait", "--for=condition=Established", "--timeout=30s",
                   "crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io")
        for overlay in OVERLAYS:
            result.rendered[overlay] = render(cp, overlay)
            result.applied[overlay] = apply(cp, result.rendered[overlay])
        yield result
    finally:
        # Each overlay renders everything deploy/ does plus its component: remove the components' too.
        for overlay in reversed(OVERLAYS[1:]):
            remove(cp, result.rendered.get(overlay) or render(cp, overlay))
        remove(cp, crds)


@pytest.fixture(scope="module")
def deployment(control_plane: ControlPlane) -> Iterator[Deployment]:
    """deploy/ and deploy/with-annotator/ applied server side to the shared control plane for one module."""
    with deployed(control_plane) as applied:
        for overlay, answer in applied.applied.items():
            # Fail here, naming the refusal, rather than in whichever test first misses an object.
            assert answer.returncode == 0, f"applying {overlay}: {answer.stderr}"
        yield applied
