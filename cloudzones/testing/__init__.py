"""Test doubles for cloudzones and for provisioner authors: a fake Kubernetes API server, and a real one.

`ControlPlane` (in `cloudzones.testing.controlplane`, loaded on first use) runs a real etcd,
kube-apiserver, kube-scheduler and kube-controller-manager on loopback; `FakeKubeApi` is the fast
in-memory stand-in, held to the same contract tests.

`FakeKubeApi` is an in-memory Kubernetes API over HTTP on 127.0.0.1, served from a background
thread, that the real (synchronous, urllib3-based) ``kubernetes`` client talks to unchanged.

Why not kmock: we evaluated nolar/kmock (0.8), the most credible Python Kubernetes mock. It is
asyncio/aiohttp and runs in the test's event loop, while our code and the official client are
synchronous; it is not installed in our environment and adding it would add a dependency. More
to the point, its ``KubernetesEmulator`` lacks what our controllers must be tested against:
lists report a placeholder ``resourceVersion``, watches ignore the requested ``resourceVersion``
and ``timeoutSeconds`` and never send BOOKMARK or 410 Gone, updates never answer 409 Conflict,
patches are plain dict merges, and there are no label selectors. So we wrote our own on the
standard library's ``http.server.ThreadingHTTPServer`` (seven small modules, no dependency), with
the semantics our controllers depend on and the fault hooks our tests need.
"""

from cloudzones.testing._kube_faults import Fault, RequestRecord
from cloudzones.testing._kube_status import RESOURCES, ApiStatusError, ResourceType
from cloudzones.testing.kubeapi import FakeKubeApi

__all__ = ["RESOURCES", "ApiStatusError", "ControlPlane", "FakeKubeApi", "Fault", "RequestRecord", "ResourceType"]


def __getattr__(name: str) -> object:
    # ControlPlane pulls in the kubernetes client (~0.4 s); only those who use it pay for it.
    if name == "ControlPlane":
        from cloudzones.testing.controlplane import ControlPlane

        return ControlPlane
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
