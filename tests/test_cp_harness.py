"""The control-plane build script and the `ControlPlane` harness: pins, caching, refusals, RBAC, scheduling."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

from cloudzones import errors, kube
from cloudzones.testing import controlplane
from cloudzones.testing.controlplane import ControlPlane, ControlPlaneError

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "control-plane"


def run_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run scripts/control-plane with exactly ``env`` (plus a PATH without Go unless given)."""
    return subprocess.run([str(SCRIPT), *args], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                          timeout=60, check=False)


class TestPins:
    """The script, the Go module and the harness name the same versions."""

    def test_versions_agree(self) -> None:
        """k8s and etcd versions in the script match go.mod's requires and the harness's cache folder name."""
        script = SCRIPT.read_text()
        k8s = re.search(r'k8s_version="(v[\d.]+)"', script)
        etcd = re.search(r'etcd_version="(v[\d.]+)"', script)
        assert k8s and etcd
        go_mod = (ROOT / "controlplane" / "go.mod").read_text()
        assert f"k8s.io/kubernetes {k8s[1]}" in go_mod and f"go.etcd.io/etcd/server/v3 {etcd[1]}" in go_mod
        assert f"k8s-{k8s[1]}-etcd-{etcd[1]}" == controlplane.VERSION

    def test_every_staging_module_is_replaced_by_its_release(self) -> None:
        """Each k8s.io staging module is mapped to the v0.x.y published with the pinned release."""
        go_mod = (ROOT / "controlplane" / "go.mod").read_text()
        minor = re.search(r"k8s.io/kubernetes v1\.(\d+)\.(\d+)", go_mod)
        assert minor
        replaced = re.findall(r"^\s+(k8s\.io/[\w-]+) => \1 (v[\d.]+)$", go_mod, re.M)
        assert len(replaced) >= 30
        assert {version for _, version in replaced} == {f"v0.{minor[1]}.{minor[2]}"}
        assert (ROOT / "controlplane" / "go.sum").stat().st_size > 0


class TestScript:
    """scripts/control-plane: one clear line and exit 1 when it cannot help."""

    def test_no_go(self, tmp_path: pathlib.Path) -> None:
        """Without Go (and nothing cached) build fails with one line naming the fix."""
        result = run_script("build", env={"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")})
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and "Go is not installed" in result.stderr

    def test_go_too_old(self, tmp_path: pathlib.Path) -> None:
        """A Go older than the module needs is named with the version it found."""
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "go").write_text("#!/bin/sh\necho go1.21.4\n")
        (fake / "go").chmod(0o755)
        result = run_script("build", env={"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                                          "PATH": f"{fake}:/usr/bin:/bin"})
        assert result.returncode == 1 and result.stderr.strip() == (
            "control-plane: Go 1.21 is too old: Kubernetes v1.37.2 needs Go >= 1.26")

    def test_path_without_binaries(self, tmp_path: pathlib.Path) -> None:
        """`path` with an empty cache says how to build, exit 1."""
        result = run_script("path", env={"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)})
        assert result.returncode == 1 and "scripts/control-plane build" in result.stderr

    def test_user_folder_without_binaries(self, tmp_path: pathlib.Path) -> None:
        """CLOUDZONES_CONTROL_PLANE pointing at a folder without etcd is refused, not silently ignored."""
        result = run_script("path", env={"HOME": str(tmp_path), "CLOUDZONES_CONTROL_PLANE": str(tmp_path)})
        assert result.returncode == 1 and "has no etcd and kube-apiserver" in result.stderr

    def test_usage(self, tmp_path: pathlib.Path) -> None:
        """An unknown action is a usage error (exit 2)."""
        assert run_script("frobnicate", env={"HOME": str(tmp_path)}).returncode == 2

    def test_user_folder_wins(self, tmp_path: pathlib.Path) -> None:
        """KUBEBUILDER_ASSETS with etcd and kube-apiserver is used as is: build prints it last, builds nothing."""
        for name in ("etcd", "kube-apiserver"):
            (tmp_path / name).write_text("#!/bin/sh\n")
            (tmp_path / name).chmod(0o755)
        result = run_script("build", env={"HOME": str(tmp_path), "KUBEBUILDER_ASSETS": str(tmp_path)})
        assert result.returncode == 0 and result.stdout.strip().splitlines()[-1] == str(tmp_path)

    def test_cached_build_does_nothing(self, control_plane: ControlPlane) -> None:
        """With the binaries cached, build prints their folder at once and compiles nothing."""
        env = {k: v for k, v in os.environ.items() if k not in ("CLOUDZONES_CONTROL_PLANE", "KUBEBUILDER_ASSETS")}
        if control_plane.binaries != controlplane.cache_dir():
            env["CLOUDZONES_CONTROL_PLANE"] = str(control_plane.binaries)
        result = subprocess.run([str(SCRIPT), "build"], env=env, capture_output=True, text=True, timeout=30,
                                check=False)
        assert result.returncode == 0 and result.stdout.strip() == str(control_plane.binaries)
        assert "building" not in result.stderr


class TestHarness:
    """ControlPlane runs a real, RBAC-enforcing API server with a scheduler and a controller manager."""

    def test_missing_binaries(self, tmp_path: pathlib.Path) -> None:
        """A folder without the binaries is refused with the command that builds them."""
        with pytest.raises(ControlPlaneError, match="scripts/control-plane build"):
            ControlPlane(binaries=tmp_path)

    def test_nodes_are_ready(self, control_plane: ControlPlane) -> None:
        """add_nodes creates Ready nodes with allocatable resources, and labels and provider IDs as given."""
        control_plane.add_nodes([{"metadata": {"name": "harness-n1", "labels": {"zone": "z1"}},
                                  "spec": {"providerID": "azure:///x"}}])
        try:
            node = control_plane.client.get(kube.NODES, "harness-n1")
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready[0]["status"] == "True" and node["status"]["allocatable"]["cpu"] == "4"
            assert node["metadata"]["labels"]["zone"] == "z1" and node["spec"]["providerID"] == "azure:///x"
        finally:
            control_plane.client.delete(kube.NODES, "harness-n1")

    def test_service_account_has_only_its_rights(self, control_plane: ControlPlane) -> None:
        """A service account without bindings is refused (403): RBAC is on, the token is really its own."""
        control_plane.ensure_namespace("harness-rbac")
        path = control_plane.kubeconfig_for("harness-rbac", "default")
        with kube.KubeClient.from_kubeconfig(path) as client, pytest.raises(errors.KubeApiError) as info:
            client.list(kube.NODES)
        assert info.value.status == 403 and "system:serviceaccount:harness-rbac:default" in str(info.value)

    def test_scheduler_binds_pods(self, control_plane: ControlPlane) -> None:
        """kube-scheduler runs: a pod with a node selector is bound to the only matching Ready node."""
        control_plane.ensure_namespace("harness-sched")
        control_plane.add_nodes([{"metadata": {"name": "harness-sched-n", "labels": {"harness": "sched"}}}])
        try:
            pod = {"metadata": {"name": "p", "namespace": "harness-sched"},
                   "spec": {"nodeSelector": {"harness": "sched"}, "containers": [{"name": "c", "image": "x"}]}}
            control_plane.client.create(kube.PODS, pod)
            stream = control_plane.client.watch(kube.PODS, namespace="harness-sched", timeout_seconds=30,
                                                field_selector="metadata.name=p")
            bound = next(e.object for e in stream if e.object.get("spec", {}).get("nodeName"))
            stream.stop()
            assert bound["spec"]["nodeName"] == "harness-sched-n"
        finally:
            control_plane.client.delete(kube.NODES, "harness-sched-n")

    def test_controller_manager_runs(self, control_plane: ControlPlane) -> None:
        """kube-controller-manager runs: a new namespace gets its default service account from it."""
        control_plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": "harness-kcm"}})
        found = control_plane.watch_until("/api/v1/namespaces/harness-kcm/serviceaccounts",
                                          lambda sa: sa["metadata"]["name"] == "default")
        assert found is not None

    def test_stop_removes_everything(self) -> None:
        """Leaving the block stops every process and removes the folder, also after an exception."""
        plane = ControlPlane()
        with pytest.raises(RuntimeError), plane:
            folder = plane.folder
            processes = [p for _, p, _ in plane._processes]
            raise RuntimeError("a failing test")
        assert folder is not None and not folder.exists()
        assert all(p.poll() is not None for p in processes)

