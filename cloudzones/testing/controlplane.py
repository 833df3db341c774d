"""`ControlPlane`: a real Kubernetes control plane on loopback (etcd, kube-apiserver, optionally kube-scheduler
and kube-controller-manager), for our tests and for downstream provisioner authors.

The binaries come from ``scripts/control-plane build`` (built from the pinned Go module in
``controlplane/``), or from ``CLOUDZONES_CONTROL_PLANE`` / ``KUBEBUILDER_ASSETS``::

    with ControlPlane(scheduler=True) as cp:
        cp.add_nodes([{"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "eastus-1"}}}])
        client = KubeClient.from_kubeconfig(cp.kubeconfig_for("cloudzones-system", "cloudzones-controller"))

The API server runs with RBAC authorization, service-account token signing (EC keys), a self-signed
serving certificate and an admin client certificate (group ``system:masters``); the controller
manager runs without the node lifecycle controller, so nodes without a kubelet stay Ready. Every
file lives in one temporary folder, removed with the processes when the block ends, also on an
exception; the children are asked by the kernel to die with this process (``PR_SET_PDEATHSIG``), so
an interrupted test run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import pathlib
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cloudzones import errors, kube
from cloudzones.testing._pki import Authority

VERSION = "k8s-v1.37.2-etcd-v3.7.0"
"""The cache folder name ``scripts/control-plane`` builds into (a test keeps the two in step)."""
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl")
_NEEDED = ("etcd", "kube-apiserver")


class ControlPlaneError(errors.CloudZonesError):
    """The control plane's binaries are missing, or a component would not start."""


def cache_dir() -> pathlib.Path:
    """Where ``scripts/control-plane build`` puts the binaries of this version."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "cloudzones" / "control-plane" / VERSION


def find_binaries() -> pathlib.Path | None:
    """The folder holding etcd and kube-apiserver: ``CLOUDZONES_CONTROL_PLANE``, ``KUBEBUILDER_ASSETS``, the cache."""
    for variable in ("CLOUDZONES_CONTROL_PLANE", "KUBEBUILDER_ASSETS"):
        if os.environ.get(variable):
            folder = pathlib.Path(os.environ[variable])
            return folder if all((folder / b).is_file() for b in _NEEDED) else None
    folder = cache_dir()
    return folder if all((folder / b).is_file() for b in _NEEDED) else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: the kernel sends SIGKILL when this process dies.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler, kube-controller-manager) on free loopback ports."""

    def __init__(self, *, scheduler: bool = False, controller_manager: bool = False,
                 binaries: str | os.PathLike[str] | None = None, startup_timeout: float = 90.0) -> None:
        found = pathlib.Path(binaries) if binaries else find_binaries()
        if found is None:
            raise ControlPlaneError("no control-plane binaries: run 'scripts/control-plane build' (needs Go) or set "
                                    "CLOUDZONES_CONTROL_PLANE to a folder with etcd and kube-apiserver")
        wanted = [*_NEEDED, *(["kube-scheduler"] if scheduler else []),
                  *(["kube-controller-manager"] if controller_manager else [])]
        missing = [b for b in wanted if not (found / b).is_file()]
        if missing:
            raise ControlPlaneError(f"{found} lacks {', '.join(missing)}: run 'scripts/control-plane build'")
        self.binaries = found
        self.scheduler, self.controller_manager = scheduler, controller_manager
        self.startup_timeout = startup_timeout
        self.folder: pathlib.Path | None = None
        self.url = ""
        """The https URL of the API server."""
        self.kubeconfig = ""
        """The path of an admin kubeconfig (client certificate in ``system:masters``)."""
        self.ca_file = ""
        """The CA that signed the API server's serving certificate."""
        self.etcd_url = ""
        """etcd's client URL (plain HTTP on loopback), for tests that compact or inspect storage."""
        self._client: kube.KubeClient | None = None
        self._processes: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []
        self._ssl: ssl.SSLContext | None = None
        self.startup_seconds = 0.0
        """How long `start` took, for the benchmark."""

    def __repr__(self) -> str:
        return f"ControlPlane(url={self.url!r}, binaries={str(self.binaries)!r})"

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start every component and wait until the API server is ready; returns self."""
        started = time.monotonic()
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="cloudzones-control-plane-"))
        pki = Authority(self.folder / "pki", name="cloudzones control-plane CA")
        serving = pki.issue("apiserver", "kube-apiserver", hosts=("127.0.0.1", "localhost"))
        admin = pki.issue("admin", "cloudzones-admin", organizations=("system:masters",), client=True)
        sa_key, sa_public = _service_account_keys(self.folder / "pki")
        self.ca_file = str(pki.ca_file)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{api_port}"
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn("etcd", [
            "--name=default", f"--data-dir={self.folder / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}", f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level=warn"])
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--tls-cert-file={serving.cert_file}", f"--tls-private-key-file={serving.key_file}",
            f"--client-ca-file={pki.ca_file}", "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_public}", f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.96.0.0/24", "--allow-privileged=true",
            f"--cert-dir={self.folder / 'apiserver-certs'}", "--profiling=false",
            # A loopback advertise address cannot be published as the kubernetes Service's endpoint.
            "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false", "--v=1"])
        self._ssl = ssl.create_default_context(cafile=self.ca_file)
        self._ssl.load_cert_chain(str(admin.cert_file), str(admin.key_file))
        self.kubeconfig = str(self._write_kubeconfig("admin", {
            "client-certificate": str(admin.cert_file), "client-key": str(admin.key_file)}))
        self._wait_ready(started)
        if self.scheduler:
            self._spawn("kube-scheduler", [f"--kubeconfig={self.kubeconfig}", "--leader-elect=false",
                                           "--secure-port=0", "--v=1"])
        if self.controller_manager:
            # The node lifecycle controller would taint and evict nodes that have no kubelet; IPAM needs a pod CIDR.
            self._spawn("kube-controller-manager", [
                f"--kubeconfig={self.kubeconfig}", "--leader-elect=false", "--secure-port=0",
                "--controllers=*,-node-lifecycle-controller,-node-ipam-controller",
                f"--service-account-private-key-file={sa_key}", f"--root-ca-file={pki.ca_file}", "--v=1"])
            # Ready once its service-account controller has given the default namespace its account.
            if self.watch_until("/api/v1/namespaces/default/serviceaccounts",
                                lambda sa: sa["metadata"]["name"] == "default") is None:
                raise ControlPlaneError("kube-controller-manager did not start: "
                                        + " | ".join(self.log_of("kube-controller-manager").splitlines()[-3:]))
        self._check_alive()
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL after 5 s) and remove the folder."""
        if self._client is not None:
            self._client.close()
            self._client = None
        # One at a time, dependants first: an API server whose etcd is already gone takes long to quit.
        for _name, process, log in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
        self._processes.clear()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    # -- what tests use --------------------------------------------------------------------------
    @property
    def client(self) -> kube.KubeClient:
        """An admin `KubeClient`."""
        if self._client is None:
            self._client = kube.KubeClient.from_kubeconfig(self.kubeconfig)
        return self._client

    def kubeconfig_for(self, namespace: str, service_account: str, *, expiration: int = 86400) -> str:
        """The path of a kubeconfig that authenticates as that (existing) service account, by a bound token."""
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": expiration}}
        answer = self.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
                              request)
        return str(self._write_kubeconfig(f"{namespace}.{service_account}", {"token": answer["status"]["token"]}))

    def add_nodes(self, nodes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Create each node and mark it Ready (allocatable 4 CPU, 16Gi, 110 pods unless its status says otherwise)."""
        created = []
        for node in nodes:
            body = {k: v for k, v in node.items() if k != "status"}
            body.setdefault("apiVersion", "v1")
            body.setdefault("kind", "Node")
            name = body["metadata"]["name"]
            self.client.create(kube.NODES, body)
            status = dict(node.get("status") or {})
            resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
            status.setdefault("capacity", resources)
            status.setdefault("allocatable", status["capacity"])
            status.setdefault("conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                              "message": "cloudzones.testing: no kubelet, Ready by fiat"}])
            self.client.patch(kube.NODES, name, {"status": status}, subresource="status")
            # The API server's TaintNodesByCondition admission adds not-ready:NoSchedule to every new node;
            # the node lifecycle controller (off here) would lift it once Ready. Keep only the caller's taints.
            taints = list((body.get("spec") or {}).get("taints") or [])
            created.append(self.client.patch(kube.NODES, name, {"spec": {"taints": taints or None}}))
        return created

    def ensure_namespace(self, name: str) -> None:
        """Create the namespace and its ``default`` service account (the controller manager would add it)."""
        for resource, body in (("namespaces", {"metadata": {"name": name}}),
                               (f"namespaces/{name}/serviceaccounts", {"metadata": {"name": "default"}})):
            with contextlib.suppress(errors.KubeAlreadyExists):
                self.request("POST", f"/api/v1/{resource}", body)

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str = "application/json") -> dict[str, Any]:
        """One admin request to any API path (for what `KubeClient` does not cover); JSON in and out."""
        assert self._ssl is not None, "start the control plane first"
        host, port = self.url.removeprefix("https://").split(":")
        connection = http.client.HTTPSConnection(host, int(port), context=self._ssl, timeout=30)
        try:
            data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
            connection.request(method, path, body=data, headers={"Content-Type": content_type,
                                                                  "Accept": "application/json"})
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        decoded = json.loads(raw) if raw else {}
        if response.status >= 400:
            from cloudzones.kube.watch import error_from_status
            raise error_from_status(decoded if isinstance(decoded, dict) else {"code": response.status},
                                    f"{method} {path}")
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """TLS settings for raw admin requests: trusts the serving certificate, presents the admin one."""
        assert self._ssl is not None, "start the control plane first"
        return self._ssl

    def watch_until(self, path: str, predicate: Callable[[dict[str, Any]], bool], *,
                    timeout: int = 30) -> dict[str, Any] | None:
        """Watch a collection ``path`` (``/api/v1/namespaces/x/serviceaccounts``) until an event's object
        satisfies ``predicate``; returns that object, or None after ``timeout`` seconds."""
        url = f"{self.url}{path}?watch=true&timeoutSeconds={timeout}"
        with urllib.request.urlopen(urllib.request.Request(url), context=self.ssl_context,  # noqa: S310
                                    timeout=timeout + 5) as stream:
            for line in stream:
                event = json.loads(line)
                if event.get("type") != "ERROR" and predicate(event["object"]):
                    return dict(event["object"])
        return None

    def log_of(self, component: str) -> str:
        """What a component has written to its log so far."""
        assert self.folder is not None
        return (self.folder / f"{component}.log").read_text(errors="replace")

    def kubectl(self, *args: str, kubeconfig: str | None = None, input: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the kubectl built beside the control plane (else the one on PATH) against it."""
        binary = self.binaries / "kubectl"
        program = str(binary) if binary.is_file() else shutil.which("kubectl")
        if program is None:
            raise ControlPlaneError("no kubectl beside the control plane nor on PATH")
        result = subprocess.run([program, f"--kubeconfig={kubeconfig or self.kubeconfig}", *args], input=input,  # noqa: S603
                                capture_output=True, text=True, timeout=120, check=False)
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    # -- internals -------------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> None:
        assert self.folder is not None
        log = (self.folder / f"{name}.log").open("wb")
        process = subprocess.Popen([str(self.binaries / name), *args], stdout=log, stderr=subprocess.STDOUT,  # noqa: S603
                                   stdin=subprocess.DEVNULL, cwd=self.folder, preexec_fn=_die_with_parent)  # noqa: PLW1509
        self._processes.append((name, process, log))

    def _check_alive(self) -> None:
        for name, process, _log in self._processes:
            if process.poll() is not None:
                tail = self.log_of(name).strip().splitlines()[-5:]
                raise ControlPlaneError(f"{name} exited with {process.returncode}: " + " | ".join(tail))

    def _wait_ready(self, started: float) -> None:
        last = "no answer yet"
        while time.monotonic() - started < self.startup_timeout:
            self._check_alive()
            try:
                self.request("GET", "/readyz", content_type="text/plain")
                return
            except json.JSONDecodeError:
                return  # /readyz answers "ok" in plain text with 200
            except (OSError, errors.KubeApiError) as exc:
                last = str(exc)
            time.sleep(0.1)  # polling a starting process: nothing to inject a clock into
        raise ControlPlaneError(f"the API server was not ready after {self.startup_timeout:.0f} s: {last}")

    def _write_kubeconfig(self, name: str, user: dict[str, str]) -> pathlib.Path:
        assert self.folder is not None
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": "cloudzones",
                          "cluster": {"server": self.url, "certificate-authority": self.ca_file}}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": "cloudzones", "user": name}}],
        }
        path = self.folder / f"kubeconfig-{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path


def _service_account_keys(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The token-signing key (SEC1 "EC PRIVATE KEY", which the API server reads) and its public half."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = folder / "sa.key"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    private.chmod(0o600)
    public = folder / "sa.pub"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public
