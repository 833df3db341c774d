"""The contract suite's two backends (`FakeKubeApi` and the session's real kube-apiserver) and its helpers."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes.client
import pytest
import yaml

from cloudzones import errors, kube
from cloudzones.testing import FakeKubeApi, controlplane

_CLEANED = ("nodes", "persistentvolumes", "storageclasses")


@dataclasses.dataclass
class Backend:
    """One API server seen the same way whichever it is: a client, a namespace, names and seeding."""

    kind: str
    """``fake`` or ``real``."""
    client: kube.KubeClient
    kubeconfig: str
    namespace: str
    suffix: str
    fake: FakeKubeApi | None = None
    plane: Any = None
    """The `ControlPlane` for ``real``."""

    def name(self, base: str) -> str:
        """A name of this test's own: shared clusters see many tests."""
        return f"{base}-{self.suffix}"

    def seed(self, resource: str, obj: dict[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Store an object, ``status`` included (the fake in-process; the real one by create, then /status)."""
        ns = namespace or (self.namespace if kube.RESOURCES[resource].namespaced else None)
        if self.fake is not None:
            return self.fake.create(resource, obj, namespace=ns)
        created = self.client.create(resource, {k: v for k, v in obj.items() if k != "status"}, namespace=ns)
        if "status" not in obj:
            return created
        return self.client.patch(resource, created["metadata"]["name"], {"status": obj["status"]}, namespace=ns,
                                 subresource="status")

    def create_namespace(self, name: str) -> None:
        """Make a namespace exist (the fake has no namespaces: any name works there)."""
        if self.plane is not None:
            self.plane.ensure_namespace(name)

    def core(self) -> Any:
        """The official client's CoreV1Api on this backend, for requests `KubeClient` does not make."""
        return kubernetes.client.CoreV1Api(self.client.api_client)

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run kubectl v1.37 (from the control-plane cache) against this backend."""
        binary = controlplane.cache_dir() / "kubectl"
        return subprocess.run([str(binary), f"--kubeconfig={self.kubeconfig}", *args], input=input,
                              capture_output=True, text=True, timeout=60, check=False)

    def cleanup(self) -> None:
        """Remove the cluster-scoped objects (and the namespace) this test made on the real server."""
        if self.plane is None:
            return
        for resource in _CLEANED:
            for item in self.client.list(resource)["items"]:
                name = item["metadata"]["name"]
                if name.endswith(self.suffix):
                    with contextlib.suppress(errors.KubeNotFound):
                        if item["metadata"].get("finalizers"):
                            self.client.patch(resource, name, {"metadata": {"finalizers": None}})
                        self.client.delete(resource, name)
        with contextlib.suppress(errors.KubeNotFound):
            self.plane.request("DELETE", f"/api/v1/namespaces/{self.namespace}")


def _fake_kubeconfig(url: str, folder: pathlib.Path) -> str:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
              "clusters": [{"name": "fake", "cluster": {"server": url}}],
              "users": [{"name": "fake", "user": {}}],
              "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}
    path = folder / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.controlplane)])
def backend(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Backend]:
    """The same adapter over a fresh FakeKubeApi or over the shared real control plane."""
    suffix = uuid.uuid4().hex[:8]
    if request.param == "fake":
        with FakeKubeApi() as api, kube.KubeClient.for_host(api.url, sleep=lambda _s: None) as client:
            yield Backend("fake", client, _fake_kubeconfig(api.url, tmp_path), f"contract-{suffix}", suffix, fake=api)
        return
    plane = request.getfixturevalue("control_plane")
    backend = Backend("real", kube.KubeClient.from_kubeconfig(plane.kubeconfig, sleep=lambda _s: None),
                      plane.kubeconfig, f"contract-{suffix}", suffix, plane=plane)
    backend.create_namespace(backend.namespace)
    try:
        yield backend
    finally:
        backend.cleanup()
        backend.client.close()


def error_of(call: Callable[[], Any]) -> errors.KubeApiError:
    with pytest.raises(errors.KubeApiError) as info:
        call()
    return info.value


def names_of(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def raw_error(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(kubernetes.client.ApiException) as info:
        call()
    return int(info.value.status or 0), json.loads(info.value.body)


def seed_nodes(backend: Backend, *bases: str, **labels: str) -> list[str]:
    names = [backend.name(base) for base in bases]
    for name in names:
        backend.seed("nodes", {"metadata": {"name": name, "labels": {"run": backend.suffix, **labels}}})
    return names


def seed_leases(backend: Backend, *names: str) -> None:
    # Leases in the test's namespace: no controller of the real control plane touches them (nodes get
    # annotated by the TTL controller at any moment).
    for name in names:
        backend.seed("leases", {"metadata": {"name": name, "labels": {"run": backend.suffix}}, "spec": {}})


def seed_pod(backend: Backend, name: str) -> dict[str, Any]:
    # Bound to a node that does not exist: no scheduler, kubelet or controller writes to it during a test.
    return backend.seed("pods", {"metadata": {"name": name}, "spec": {
        "nodeName": backend.name("nowhere"), "containers": [{"name": "c", "image": "example.invalid/x"}]},
        "status": {"phase": "Pending", "message": "seeded"}})
