"""The long-running subcommands as real processes: they start, serve, and shut down cleanly on SIGTERM."""

from __future__ import annotations

import json
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import threading
import urllib.request

import pytest
import yaml

from cloudzones.testing.kubeapi import FakeKubeApi
from cloudzones.testing.tls import make_tls_files
from tests.conftest import fixture_text

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(*args: str) -> subprocess.Popen[str]:
    """Run ``cloudzones ARGS`` with INFO logs on stderr; a watchdog kills it after 60 s so no test can hang."""
    process = subprocess.Popen([sys.executable, "-m", "cloudzones.cli", "--log-level", "INFO", *args], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, process.kill)
    watchdog.daemon = True
    watchdog.start()
    return process


def wait_for_line(process: subprocess.Popen[str], needle: str) -> str:
    """Read stderr until a line contains ``needle`` (blocking reads, no polling)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if needle in line:
            return line
    pytest.fail(f"process ended without logging {needle!r}: {''.join(seen)[-2000:]}")


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM, wait, and collect the rest of stderr (closing the pipes)."""
    process.send_signal(signal.SIGTERM)
    try:
        _, rest = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, rest = process.communicate()
    return process.returncode, rest


@pytest.fixture
def cloud_config(tmp_path: pathlib.Path) -> pathlib.Path:
    """A cloud config with a client secret (never used: no test PV or node needs ARM)."""
    path = tmp_path / "azure.json"
    path.write_text(json.dumps({"tenantId": "t", "subscriptionId": "s", "resourceGroup": "rg", "location": "eastus",
                                "aadClientId": "c", "aadClientSecret": "never-logged"}))
    return path


class TestWebhookProcess:
    """``cloudzones webhook`` serves TLS and exits 0 on SIGTERM."""

    def test_serves_and_stops(self, tmp_path: pathlib.Path, cloud_config: pathlib.Path) -> None:
        """A non-Azure PV review is answered over TLS; SIGTERM ends the process cleanly."""
        tls = make_tls_files(tmp_path / "tls")
        port = free_port()
        process = start("webhook", "--cloud-config", str(cloud_config), "--tls-cert-file", str(tls.cert_file),
                        "--tls-key-file", str(tls.key_file), "--address", "127.0.0.1", "--port", str(port))
        try:
            wait_for_line(process, "webhook serving on")
            review = json.loads(fixture_text("admission/pv-create-azuredisk.json"))
            review["request"]["object"]["spec"] = {"nfs": {"server": "x", "path": "/"}}
            request = urllib.request.Request(f"https://127.0.0.1:{port}/mutate-pv", data=json.dumps(review).encode(),
                                             method="POST", headers={"Content-Type": "application/json"})
            context = ssl.create_default_context(cafile=str(tls.ca_file))
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                answer = json.loads(response.read())
            assert answer["response"] == {"uid": review["request"]["uid"], "allowed": True}
        finally:
            code, rest = stop(process)
        assert code == 0
        assert "never-logged" not in rest



class TestControllerProcess:
    """``cloudzones controller`` takes the Lease, and gives it back on SIGTERM."""

    def test_lease_taken_and_released(self, api: FakeKubeApi, tmp_path: pathlib.Path,
                                      cloud_config: pathlib.Path) -> None:
        """The Lease names the controller while it runs and has no holder after SIGTERM; exit code 0."""
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": api.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}))
        api.create("nodes", {"metadata": {"name": "kind-worker"}, "spec": {"providerID": "kind://docker/kind/kind-worker"}})
        process = start("controller", "--kubeconfig", str(kubeconfig), "--cloud-config", str(cloud_config),
                        "--metrics-port", "0", "--leader-election-namespace", "kube-system")
        try:
            wait_for_line(process, "started leading")
            lease = api.get("leases", "cloudzones-controller", namespace="kube-system")
            assert lease["spec"]["holderIdentity"]
        finally:
            code, rest = stop(process)
        assert code == 0, rest
        assert "released the lease" in rest
        lease = api.get("leases", "cloudzones-controller", namespace="kube-system")
        assert not lease["spec"].get("holderIdentity")
