"""Tests for cloudzones.kube.KubeClient: plain dicts, error mapping, retries, and building clients."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest
import yaml

from cloudzones import errors, kube
from cloudzones.retry import RetryPolicy
from cloudzones.testing import FakeKubeApi
from cloudzones.testing.tls import make_tls_files


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(api: FakeKubeApi, sleeps: list[float]) -> Iterator[kube.KubeClient]:
    with kube.KubeClient.for_host(api.url, sleep=sleeps.append, rand=lambda: 0.5) as c:
        yield c


class TestVerbs:
    """Each verb returns plain manifest dicts."""

    def test_round_trip(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """create, get, list, update, patch and delete work and return dicts, never client models."""
        created = client.create(kube.STORAGE_CLASSES, {"metadata": {"name": "sc"}, "provisioner": "p"})
        assert type(created) is dict and created["metadata"]["uid"]
        assert client.get("storageclasses", "sc") == created
        listed = client.list(kube.STORAGE_CLASSES)
        assert type(listed["items"][0]) is dict and listed["metadata"]["resourceVersion"]
        created["parameters"] = {"skuName": "Premium_LRS"}
        updated = client.update(kube.STORAGE_CLASSES, created)
        assert updated["parameters"] == {"skuName": "Premium_LRS"}
        patched = client.patch(kube.STORAGE_CLASSES, "sc", {"metadata": {"labels": {"a": "b"}}})
        assert patched["metadata"]["labels"] == {"a": "b"}
        client.delete(kube.STORAGE_CLASSES, "sc")
        assert api.find("storageclasses", "sc") is None

    def test_namespaced(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Namespaced resources take the namespace from the argument or the body; list(None) is all namespaces."""
        client.create(kube.PODS, {"metadata": {"name": "p", "namespace": "a"}})
        client.create(kube.PODS, {"metadata": {"name": "p"}}, namespace="b")
        assert client.get(kube.PODS, "p", namespace="b")["metadata"]["namespace"] == "b"
        assert len(client.list(kube.PODS)["items"]) == 2
        assert len(client.list(kube.PODS, namespace="a")["items"]) == 1
        assert api.requests[-2].path == "/api/v1/pods"

    @pytest.mark.parametrize(("patch_type", "patch", "content_type"), [
        ("merge", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json"),
        ("strategic", {"metadata": {"labels": {"a": "b"}}}, "application/strategic-merge-patch+json"),
        ("json", [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}], "application/json-patch+json"),
    ])
    def test_patch_types(self, api: FakeKubeApi, client: kube.KubeClient, patch_type: str, patch: object,
                         content_type: str) -> None:
        """Each patch type is sent with its content type and applied."""
        api.create("nodes", {"metadata": {"name": "n"}})
        node = client.patch(kube.NODES, "n", patch, patch_type=patch_type)
        assert node["metadata"]["labels"] == {"a": "b"}
        assert api.requests[-1].content_type == content_type

    def test_status_subresource(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """subresource='status' reaches /status."""
        api.create("nodes", {"metadata": {"name": "n"}, "status": {"phase": "A"}})
        assert client.patch(kube.NODES, "n", {"status": {"phase": "B"}}, subresource="status")["status"] == {
            "phase": "B"}
        node = client.get(kube.NODES, "n")
        node["status"]["phase"] = "C"
        assert client.update(kube.NODES, node, subresource="status")["status"] == {"phase": "C"}
        assert api.requests[-1].path == "/api/v1/nodes/n/status"

    def test_selectors_and_pages(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Selectors and page_size reach the server as labelSelector, fieldSelector and limit."""
        api.create("nodes", {"metadata": {"name": "a", "labels": {"z": "1"}}})
        api.create("nodes", {"metadata": {"name": "b"}})
        result = client.list(kube.NODES, label_selector="z", field_selector="metadata.name=a", page_size=10)
        assert [n["metadata"]["name"] for n in result["items"]] == ["a"]
        assert api.requests[-1].query == {"labelSelector": "z", "fieldSelector": "metadata.name=a", "limit": "10"}

    def test_paged_list(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """list follows continue tokens to the end; list_pages yields each page as it comes."""
        for name in "abcde":
            api.create("nodes", {"metadata": {"name": name}})
        assert [n["metadata"]["name"] for n in client.list(kube.NODES, page_size=2)["items"]] == list("abcde")
        assert api.count("list", "nodes") == 3
        pages = client.list_pages(kube.NODES, page_size=2)
        assert [n["metadata"]["name"] for n in next(pages)["items"]] == ["a", "b"]
        assert api.count("list", "nodes") == 4  # the next page is not fetched before it is asked for
        assert [[n["metadata"]["name"] for n in page["items"]] for page in pages] == [["c", "d"], ["e"]]
        assert [len(page["items"]) for page in client.list_pages(kube.NODES)] == [5]

    def test_delete_precondition(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """delete(resource_version=...) is refused with KubeConflict when the object moved on."""
        api.create("nodes", {"metadata": {"name": "n"}})
        with pytest.raises(errors.KubeConflict):
            client.delete(kube.NODES, "n", resource_version="12345")

    def test_bad_arguments(self, client: kube.KubeClient) -> None:
        """Unknown resources, patch types, subresources and missing namespaces are ConfigErrors, before any request."""
        with pytest.raises(errors.ConfigError, match="secrets"):
            client.get("secrets", "x")
        with pytest.raises(errors.ConfigError, match="namespace"):
            client.get(kube.PODS, "p")
        with pytest.raises(errors.ConfigError, match="yaml"):
            client.patch(kube.NODES, "n", {}, patch_type="yaml")
        with pytest.raises(errors.ConfigError, match="scale"):
            client.patch(kube.NODES, "n", {}, subresource="scale")

    def test_client_side_validation(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A body the client's models refuse raises KubeApiError without sending anything."""
        with pytest.raises(errors.KubeApiError, match="refused the body") as info:
            client.create(kube.NODES, {"metadata": {"name": "n"}, "nonsense": 1})
        assert info.value.status is None and api.requests == []


class TestErrors:
    """HTTP errors become cloudzones errors that keep status, reason and the cause."""

    def test_not_found(self, client: kube.KubeClient) -> None:
        """404 is KubeNotFound, also a LookupError, naming the object."""
        with pytest.raises(errors.KubeNotFound) as info:
            client.get(kube.PODS, "p", namespace="ns")
        assert isinstance(info.value, LookupError)
        assert (info.value.status, info.value.reason) == (404, "NotFound")
        assert 'get of pods "ns/p"' in str(info.value)
        assert isinstance(info.value.__cause__, kubernetes.client.ApiException)

    def test_conflict_and_already_exists(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """409 Conflict is KubeConflict; 409 AlreadyExists is KubeAlreadyExists, a KubeConflict too."""
        lease = api.create("leases", {"metadata": {"name": "l", "namespace": "ns"}})
        api.patch("leases", "l", {"spec": {"holderIdentity": "x"}}, namespace="ns")
        with pytest.raises(errors.KubeConflict) as conflict:
            client.update(kube.LEASES, lease)
        assert not isinstance(conflict.value, errors.KubeAlreadyExists)
        with pytest.raises(errors.KubeAlreadyExists) as exists:
            client.create(kube.LEASES, {"metadata": {"name": "l", "namespace": "ns"}})
        assert exists.value.reason == "AlreadyExists" and exists.value.status == 409

    def test_other_status(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Other statuses are KubeApiError with the server's message."""
        api.fail_next("get", "nodes", status=403, message="nodes is forbidden")
        with pytest.raises(errors.KubeApiError, match="HTTP 403 \\(Forbidden\\): nodes is forbidden") as info:
            client.get(kube.NODES, "n")
        assert type(info.value) is errors.KubeApiError


class TestRetries:
    """Bounded retries for 429, 5xx and connection errors, honouring Retry-After, with an injected sleep."""

    def test_retry_after(self, api: FakeKubeApi, client: kube.KubeClient, sleeps: list[float]) -> None:
        """A 429 with Retry-After waits that long, then succeeds."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.fail_next("patch", "nodes", status=429, retry_after=7, count=2)
        client.patch(kube.NODES, "n", {"metadata": {"labels": {"a": "b"}}})
        assert sleeps == [7, 7] and api.count("patch", "nodes") == 3

    def test_backoff_without_retry_after(self, api: FakeKubeApi, client: kube.KubeClient,
                                         sleeps: list[float]) -> None:
        """5xx without Retry-After backs off exponentially with jitter."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.fail_next("get", "nodes", status=500, count=3)
        client.get(kube.NODES, "n")
        assert sleeps == pytest.approx([0.25, 0.5, 1.0])  # ceilings 0.5, 1, 2; full jitter draws half with rand=0.5

    def test_gives_up(self, api: FakeKubeApi, client: kube.KubeClient, sleeps: list[float]) -> None:
        """After `attempts` tries the last error is raised."""
        api.fail_next("list", "nodes", status=503, count=10)
        with pytest.raises(errors.KubeApiError) as info:
            client.list(kube.NODES)
        assert info.value.status == 503 and api.count("list", "nodes") == 5 and len(sleeps) == 4

    def test_retry_after_is_capped(self, api: FakeKubeApi, sleeps: list[float]) -> None:
        """A Retry-After longer than max_retry_after is cut to it."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.fail_next("get", "nodes", status=429, retry_after=3600)
        with kube.KubeClient.for_host(api.url, sleep=sleeps.append,
                                      retry=RetryPolicy(max_retry_after=10)) as c:
            c.get(kube.NODES, "n")
        assert sleeps == [10]

    def test_no_retry_on_client_errors(self, api: FakeKubeApi, client: kube.KubeClient, sleeps: list[float]) -> None:
        """409, 404 and 400 are not retried."""
        api.fail_next("patch", "nodes", status=409)
        with pytest.raises(errors.KubeConflict):
            client.patch(kube.NODES, "n", {})
        assert sleeps == [] and api.count("patch") == 1

    def test_create_retried_only_on_429(self, api: FakeKubeApi, client: kube.KubeClient, sleeps: list[float]) -> None:
        """A create is repeated after 429 but not after 500 (the first attempt may have worked)."""
        api.fail_next("create", "nodes", status=429)
        client.create(kube.NODES, {"metadata": {"name": "a"}})
        api.fail_next("create", "nodes", status=500)
        with pytest.raises(errors.KubeApiError):
            client.create(kube.NODES, {"metadata": {"name": "b"}})
        assert api.count("create") == 3 and len(sleeps) == 1

    def test_connection_dropped(self, api: FakeKubeApi, client: kube.KubeClient, sleeps: list[float]) -> None:
        """A connection closed without an answer is retried."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.fail_next("get", "nodes", disconnect=True)
        assert client.get(kube.NODES, "n")["metadata"]["name"] == "n"
        assert len(sleeps) == 1

    def test_unreachable(self, sleeps: list[float]) -> None:
        """Nothing listening: KubeApiError without a status, after the retries."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with kube.KubeClient.for_host(f"http://127.0.0.1:{port}", sleep=sleeps.append,
                                      retry=RetryPolicy(attempts=2)) as c, \
                pytest.raises(errors.KubeApiError, match="could not be reached") as info:
            c.get(kube.NODES, "n")
        assert info.value.status is None and len(sleeps) == 1

    def test_retry_after_is_a_floor(self, api: FakeKubeApi, sleeps: list[float]) -> None:
        """A Retry-After shorter than the drawn backoff does not shorten it."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.fail_next("get", "nodes", status=503, retry_after=1, count=4)
        with kube.KubeClient.for_host(api.url, sleep=sleeps.append, rand=lambda: 1.0) as c:
            c.get(kube.NODES, "n")
        assert sleeps == [1, 1, 2, 4]


class TestConstruction:
    """Clients from a kubeconfig, from the cluster, from the environment."""

    def _kubeconfig(self, tmp_path: Path, server: str) -> Path:
        path = tmp_path / "config"
        path.write_text(yaml.safe_dump(_config({"server": server}, user={"token": "s3cret"})))
        return path

    def test_from_kubeconfig(self, api: FakeKubeApi, tmp_path: Path) -> None:
        """The kubeconfig's server and token are used."""
        with kube.KubeClient.from_kubeconfig(str(self._kubeconfig(tmp_path, api.url))) as c:
            c.list(kube.NODES)
            assert c.host == api.url
        assert api.requests[-1].headers["authorization"] == "Bearer s3cret"

    def test_bad_kubeconfig(self, tmp_path: Path) -> None:
        """A missing or broken kubeconfig is a ConfigError naming the file."""
        with pytest.raises(errors.ConfigError, match="nowhere"):
            kube.KubeClient.from_kubeconfig(str(tmp_path / "nowhere"))

    def test_for_host_token(self, api: FakeKubeApi) -> None:
        """for_host sends a bearer token when given one."""
        with kube.KubeClient.for_host(api.url, token="t0k") as c:
            c.list(kube.NODES)
        assert api.requests[-1].headers["authorization"] == "Bearer t0k"

    def test_in_cluster_outside(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Outside a pod in_cluster raises ConfigError."""
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        with pytest.raises(errors.ConfigError, match="not running in a cluster"):
            kube.KubeClient.in_cluster()

    def test_from_environment(self, api: FakeKubeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without KUBERNETES_SERVICE_HOST the kubeconfig from $KUBECONFIG is used."""
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setenv("KUBECONFIG", str(self._kubeconfig(tmp_path, api.url)))
        with kube.KubeClient.from_environment() as c:
            assert c.host == api.url

    def test_from_environment_in_cluster(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With KUBERNETES_SERVICE_HOST set (and no service account files here) in-cluster is tried."""
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
        with pytest.raises(errors.ConfigError, match="service account"):
            kube.KubeClient.from_environment()


def _config(cluster: object, user: object = None, context: object = None, current: object = "c") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user or {"token": "t"}}],
            "contexts": [{"name": "c", "context": context or {"cluster": "c", "user": "u"}}]}


SERVER = {"server": "https://127.0.0.1:6443"}


class TestKubeconfigChecks:
    """A wrong kubeconfig is one line naming the field at start-up, never the client's crash or a late failure."""

    @pytest.mark.parametrize(("config", "message"), [
        ({"clusters": 5}, "clusters: expected a list, got a number"),
        ({"contexts": [1]}, "contexts[0]: expected a mapping, got a number"),
        (_config(SERVER, context=5), "contexts[0].context: expected a mapping, got a number"),
        (_config({"server": 5}), "clusters[0].cluster.server: expected a string, got a number"),
        (_config(SERVER, user={"token": 5}), "users[0].user.token: expected a string, got a number"),
        (_config(SERVER, current=7), "current-context: expected a string, got a number"),
        (_config({"server": "not a url"}), "server 'not a url' is not an http:// or https:// URL with a host"),
        (_config({"server": "https://host:99999"}), "server 'https://host:99999' is not an http:// or https:// URL"),
        (_config({"server": "https://[::1"}), "cannot be used: Invalid IPv6 URL"),
        (_config({**SERVER, "certificate-authority-data": "ISEh"}), "its certificate authority: not PEM that loads"),
        (_config(SERVER, user={"client-certificate-data": "eA==", "client-key-data": "eA=="}),
         "its client certificate and key: not PEM that loads"),
    ])
    def test_refused(self, tmp_path: Path, config: object, message: str) -> None:
        """Each wrong field or value is named, with the file."""
        path = tmp_path / "config"
        path.write_text(yaml.safe_dump(config))
        with pytest.raises(errors.ConfigError) as info:
            kube.KubeClient.from_kubeconfig(str(path))
        assert str(info.value).startswith(f"kubeconfig {path}: ") and message in str(info.value), info.value

    def test_real_certificates_load(self, tmp_path: Path) -> None:
        """A CA and a client pair that are real PEM pass the checks (checked, not only refused)."""
        tls = make_tls_files(tmp_path / "tls")
        path = tmp_path / "config"
        path.write_text(yaml.safe_dump(_config({**SERVER, "certificate-authority": str(tls.ca_file)},
                                               user={"client-certificate": str(tls.cert_file),
                                                     "client-key": str(tls.key_file)})))
        with kube.KubeClient.from_kubeconfig(str(path)) as c:
            assert c.host == SERVER["server"]
