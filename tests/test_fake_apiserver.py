"""Tests for the fake Kubernetes API server, driven over loopback by the real ``kubernetes`` client."""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import kubernetes.watch
import pytest
import urllib3

from cloudzones.testing import ApiStatusError, FakeKubeApi


@pytest.fixture
def raw(api: FakeKubeApi) -> Iterator[Any]:
    """A real ApiClient pointed at the fake, with urllib3's own retries off."""
    config = kubernetes.client.Configuration(host=api.url)
    config.retries = False
    config.proxy = None
    client = kubernetes.client.ApiClient(config)
    yield client
    client.close()


def _data(response: Any) -> Any:
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def _error(call: Any) -> tuple[int, dict[str, Any], Any]:
    with pytest.raises(kubernetes.client.ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body), info.value.headers


class TestCrud:
    """create / get / update / delete with the apiserver's metadata and errors."""

    def test_create_sets_metadata(self, raw: Any) -> None:
        """POST answers 201 with uid, creationTimestamp, resourceVersion, apiVersion and kind."""
        core = kubernetes.client.CoreV1Api(raw)
        node = _data(core.create_node({"metadata": {"name": "n1"}}, _preload_content=False))
        assert node["apiVersion"] == "v1" and node["kind"] == "Node"
        assert node["metadata"]["uid"] and node["metadata"]["creationTimestamp"].endswith("Z")
        assert node["metadata"]["resourceVersion"] == "1"
        assert _data(core.read_node("n1", _preload_content=False)) == node

    def test_resource_versions_are_monotonic(self, api: FakeKubeApi, raw: Any) -> None:
        """Every write gets a larger resourceVersion, across resources."""
        core = kubernetes.client.CoreV1Api(raw)
        versions = [int(_data(core.create_node({"metadata": {"name": f"n{i}"}}, _preload_content=False))
                        ["metadata"]["resourceVersion"]) for i in range(3)]
        versions.append(int(_data(core.create_namespaced_pod("ns", {"metadata": {"name": "p"}},
                                                             _preload_content=False))["metadata"]["resourceVersion"]))
        assert versions == sorted(set(versions)) and api.resource_version == versions[-1]

    def test_create_conflict(self, api: FakeKubeApi, raw: Any) -> None:
        """A second create of the same name gets 409 AlreadyExists as a Status."""
        api.create("nodes", {"metadata": {"name": "n1"}})
        code, body, _ = _error(lambda: kubernetes.client.CoreV1Api(raw).create_node(
            {"metadata": {"name": "n1"}}, _preload_content=False))
        assert code == 409
        assert body["kind"] == "Status" and body["reason"] == "AlreadyExists" and body["code"] == 409
        assert body["details"] == {"name": "n1", "group": "", "kind": "nodes"}

    def test_generate_name(self, raw: Any) -> None:
        """generateName gets a random suffix."""
        event = _data(kubernetes.client.CoreV1Api(raw).create_namespaced_event(
            "default", {"metadata": {"generateName": "node-a."}, "involvedObject": {"kind": "Node", "name": "a"},
                        "reason": "ZoneUnknown", "message": "m"}, _preload_content=False))
        assert event["metadata"]["name"].startswith("node-a.") and len(event["metadata"]["name"]) == 12

    def test_update_optimistic_concurrency(self, api: FakeKubeApi, raw: Any) -> None:
        """PUT with the current resourceVersion succeeds; with a stale one gets 409 Conflict."""
        coordination = kubernetes.client.CoordinationV1Api(raw)
        lease = api.create("leases", {"metadata": {"name": "l", "namespace": "kube-system"},
                                      "spec": {"holderIdentity": "a"}})
        lease["spec"]["holderIdentity"] = "b"
        updated = _data(coordination.replace_namespaced_lease("l", "kube-system", lease, _preload_content=False))
        assert updated["spec"]["holderIdentity"] == "b"
        assert int(updated["metadata"]["resourceVersion"]) > int(lease["metadata"]["resourceVersion"])
        code, body, _ = _error(lambda: coordination.replace_namespaced_lease("l", "kube-system", lease,
                                                                             _preload_content=False))
        assert (code, body["reason"]) == (409, "Conflict")
        assert "the object has been modified" in body["message"]

    def test_update_without_resource_version_is_unconditional(self, api: FakeKubeApi) -> None:
        """A PUT that carries no resourceVersion replaces whatever is there."""
        api.create("storageclasses", {"metadata": {"name": "sc"}, "provisioner": "a"})
        updated = api.update("storageclasses", {"metadata": {"name": "sc"}, "provisioner": "b"})
        assert updated["provisioner"] == "b"

    def test_update_missing(self, raw: Any) -> None:
        """A PUT of an object that does not exist gets 404."""
        code, body, _ = _error(lambda: kubernetes.client.StorageV1Api(raw).replace_storage_class(
            "sc", {"metadata": {"name": "sc"}, "provisioner": "x"}, _preload_content=False))
        assert (code, body["reason"]) == (404, "NotFound")

    def test_delete(self, api: FakeKubeApi, raw: Any) -> None:
        """DELETE answers the last state; the object is gone afterwards."""
        core = kubernetes.client.CoreV1Api(raw)
        api.create("persistentvolumes", {"metadata": {"name": "pv"}})
        deleted = _data(core.delete_persistent_volume("pv", _preload_content=False))
        assert deleted["metadata"]["name"] == "pv"
        code, body, _ = _error(lambda: core.read_persistent_volume("pv", _preload_content=False))
        assert code == 404 and body["message"] == 'persistentvolumes "pv" not found'

    def test_delete_precondition(self, api: FakeKubeApi, raw: Any) -> None:
        """A delete whose resourceVersion precondition is stale gets 409."""
        api.create("nodes", {"metadata": {"name": "n"}})
        code, _, _ = _error(lambda: kubernetes.client.CoreV1Api(raw).delete_node(
            "n", body={"preconditions": {"resourceVersion": "999"}}, _preload_content=False))
        assert code == 409 and api.find("nodes", "n") is not None

    def test_finalizers_delay_deletion(self, api: FakeKubeApi) -> None:
        """With finalizers a delete only marks the object; removing the last finalizer deletes it."""
        api.create("persistentvolumes", {"metadata": {"name": "pv", "finalizers": ["kubernetes.io/pv-protection"]}})
        marked = api.delete("persistentvolumes", "pv")
        assert marked["metadata"]["deletionTimestamp"]
        api.patch("persistentvolumes", "pv", {"metadata": {"finalizers": None}})
        assert api.find("persistentvolumes", "pv") is None

    def test_namespace_mismatch(self, raw: Any) -> None:
        """A body naming another namespace than the URL is a 400."""
        code, _, _ = _error(lambda: kubernetes.client.CoreV1Api(raw).create_namespaced_pod(
            "a", {"metadata": {"name": "p", "namespace": "b"}}, _preload_content=False))
        assert code == 400

    def test_in_process_errors(self, api: FakeKubeApi) -> None:
        """The in-process API raises ApiStatusError with the HTTP code."""
        with pytest.raises(ApiStatusError) as info:
            api.get("nodes", "missing")
        assert info.value.code == 404
        with pytest.raises(KeyError, match="secrets"):
            api.create("secrets", {"metadata": {"name": "s"}})


class TestList:
    """list with selectors, namespaces and the list's resourceVersion."""

    def test_label_selectors(self, api: FakeKubeApi, raw: Any) -> None:
        """The client's labelSelector reaches the server and selects."""
        for name, zone in (("a", "eastus-1"), ("b", "eastus-2"), ("c", "")):
            api.create("nodes", {"metadata": {"name": name, "labels": {"zone": zone} if zone else {}}})
        core = kubernetes.client.CoreV1Api(raw)

        def names(selector: str) -> list[str]:
            return [n["metadata"]["name"] for n in _data(core.list_node(label_selector=selector,
                                                                          _preload_content=False))["items"]]

        assert names("zone=eastus-1") == ["a"]
        assert names("zone in (eastus-1,eastus-2)") == ["a", "b"]
        assert names("zone notin (eastus-1)") == ["b", "c"]
        assert names("!zone") == ["c"]
        assert names("zone,zone!=eastus-2") == ["a"]

    def test_list_shape(self, api: FakeKubeApi, raw: Any) -> None:
        """A list has kind <Kind>List, the current resourceVersion, and items without apiVersion/kind."""
        api.create("nodes", {"metadata": {"name": "a"}})
        result = _data(kubernetes.client.CoreV1Api(raw).list_node(_preload_content=False))
        assert result["kind"] == "NodeList" and result["metadata"]["resourceVersion"] == str(api.resource_version)
        assert "kind" not in result["items"][0]

    def test_namespaces(self, api: FakeKubeApi, raw: Any) -> None:
        """Namespaced lists see one namespace; the all-namespaces route sees every one."""
        for ns in ("a", "b"):
            api.create("pods", {"metadata": {"name": "p", "namespace": ns}})
        core = kubernetes.client.CoreV1Api(raw)
        assert len(_data(core.list_namespaced_pod("a", _preload_content=False))["items"]) == 1
        assert len(_data(core.list_pod_for_all_namespaces(_preload_content=False))["items"]) == 2

    def test_field_selector(self, api: FakeKubeApi, raw: Any) -> None:
        """fieldSelector spec.nodeName picks the pods bound to a node."""
        api.create("pods", {"metadata": {"name": "p1", "namespace": "a"}, "spec": {"nodeName": "n1"}})
        api.create("pods", {"metadata": {"name": "p2", "namespace": "a"}, "spec": {}})
        result = _data(kubernetes.client.CoreV1Api(raw).list_pod_for_all_namespaces(
            field_selector="spec.nodeName=n1", _preload_content=False))
        assert [p["metadata"]["name"] for p in result["items"]] == ["p1"]

    def test_paging(self, api: FakeKubeApi, raw: Any) -> None:
        """limit and continue walk the list in pages that all carry the first page's resourceVersion."""
        for name in "abcde":
            api.create("nodes", {"metadata": {"name": name}})
        core = kubernetes.client.CoreV1Api(raw)
        first = _data(core.list_node(limit=2, _preload_content=False))
        version = first["metadata"]["resourceVersion"]
        assert [n["metadata"]["name"] for n in first["items"]] == ["a", "b"]
        assert first["metadata"]["remainingItemCount"] == 3
        # Later pages show the objects as of the first page, as the apiserver does.
        api.create("nodes", {"metadata": {"name": "bb"}})
        api.delete("nodes", "d")
        api.patch("nodes", "c", {"metadata": {"labels": {"later": "yes"}}})
        second = _data(core.list_node(limit=2, _continue=first["metadata"]["continue"], _preload_content=False))
        last = _data(core.list_node(limit=2, _continue=second["metadata"]["continue"], _preload_content=False))
        assert [n["metadata"]["name"] for n in second["items"] + last["items"]] == ["c", "d", "e"]
        assert "labels" not in second["items"][0]["metadata"]
        assert second["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"] == version
        assert "continue" not in last["metadata"]

    def test_paging_errors(self, api: FakeKubeApi, raw: Any) -> None:
        """A continue token from before the retained history is 410 Expired; a garbled one or limit is 400."""
        for name in "abc":
            api.create("nodes", {"metadata": {"name": name}})
        core = kubernetes.client.CoreV1Api(raw)
        token = _data(core.list_node(limit=1, _preload_content=False))["metadata"]["continue"]
        api.create("nodes", {"metadata": {"name": "d"}})
        api.compact()
        code, body, _ = _error(lambda: core.list_node(limit=1, _continue=token, _preload_content=False))
        assert (code, body["reason"]) == (410, "Expired") and "too old" in body["message"]
        code, body, _ = _error(lambda: core.list_node(limit=1, _continue="garbage", _preload_content=False))
        assert (code, body["reason"]) == (400, "BadRequest") and "garbage" in body["message"]
        assert urllib3.PoolManager().request("GET", f"{api.url}/api/v1/nodes?limit=x").status == 400

    def test_bad_selector(self, raw: Any) -> None:
        """A malformed selector gets 400 BadRequest."""
        code, body, _ = _error(lambda: kubernetes.client.CoreV1Api(raw).list_node(
            label_selector="a in (b", _preload_content=False))
        assert (code, body["reason"]) == (400, "BadRequest")


class TestPatch:
    """The three patch content types, as the real client sends them."""

    def test_merge_patch(self, api: FakeKubeApi, raw: Any) -> None:
        """A merge patch adds labels and removes those set to null."""
        api.create("nodes", {"metadata": {"name": "n", "labels": {"a": "1", "b": "2"}}})
        node = _data(kubernetes.client.CoreV1Api(raw).patch_node(
            "n", {"metadata": {"labels": {"b": None, "c": "3"}}}, _preload_content=False,
            _content_type="application/merge-patch+json"))
        assert node["metadata"]["labels"] == {"a": "1", "c": "3"}

    def test_client_default_is_strategic(self, api: FakeKubeApi, raw: Any) -> None:
        """A dict body with the client's default type is sent as strategic merge: taints, an atomic list, are replaced."""
        api.create("nodes", {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
        node = _data(kubernetes.client.CoreV1Api(raw).patch_node(
            "n", {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}, _preload_content=False))
        assert [t["key"] for t in node["spec"]["taints"]] == ["b"]
        assert api.requests[-1].content_type == "application/strategic-merge-patch+json"

    def test_json_patch(self, api: FakeKubeApi, raw: Any) -> None:
        """A list body is sent as a JSON patch; a failing test operation gets 422."""
        api.create("nodes", {"metadata": {"name": "n", "labels": {"a": "1"}}})
        core = kubernetes.client.CoreV1Api(raw)
        node = _data(core.patch_node("n", [{"op": "add", "path": "/metadata/labels/x~1y", "value": "1"}],
                                     _preload_content=False))
        assert node["metadata"]["labels"] == {"a": "1", "x/y": "1"}
        code, body, _ = _error(lambda: core.patch_node("n", [{"op": "test", "path": "/metadata/name", "value": "m"}],
                                                       _preload_content=False))
        assert (code, body["reason"]) == (422, "Invalid")

    def test_patch_with_stale_resource_version(self, api: FakeKubeApi) -> None:
        """A patch carrying a stale metadata.resourceVersion is a 409, as on a real server."""
        api.create("nodes", {"metadata": {"name": "n"}})
        with pytest.raises(ApiStatusError) as info:
            api.patch("nodes", "n", {"metadata": {"resourceVersion": "0", "labels": {"a": "b"}}})
        assert info.value.code == 409

    def test_no_op_patch_writes_nothing(self, api: FakeKubeApi) -> None:
        """A patch that changes nothing keeps the resourceVersion."""
        node = api.create("nodes", {"metadata": {"name": "n", "labels": {"a": "b"}}})
        again = api.patch("nodes", "n", {"metadata": {"labels": {"a": "b"}}})
        assert again["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]

    def test_unsupported_type(self, api: FakeKubeApi, raw: Any) -> None:
        """Server-side apply is refused with 415."""
        api.create("nodes", {"metadata": {"name": "n"}})
        code, _, _ = _error(lambda: kubernetes.client.CoreV1Api(raw).patch_node(
            "n", {"metadata": {}}, _preload_content=False, _content_type="application/apply-patch+yaml"))
        assert code == 415

    def test_status_subresource(self, api: FakeKubeApi, raw: Any) -> None:
        """Writes to a node keep its status; writes to nodes/status keep its spec (metadata changes, as on the apiserver)."""
        api.create("nodes", {"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24"}, "status": {"phase": "Running"}})
        core = kubernetes.client.CoreV1Api(raw)
        node = _data(core.patch_node("n", {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "X"}},
                                     _preload_content=False, _content_type="application/merge-patch+json"))
        assert node["status"] == {"phase": "Running"} and node["metadata"]["labels"] == {"a": "b"}
        node = _data(core.patch_node_status("n", {"metadata": {"labels": {"c": "d"}}, "spec": {"podCIDR": None},
                                                  "status": {"phase": "Y"}},
                                            _preload_content=False, _content_type="application/merge-patch+json"))
        assert node["status"] == {"phase": "Y"} and node["spec"] == {"podCIDR": "10.0.0.0/24"}
        assert node["metadata"]["labels"] == {"a": "b", "c": "d"}
        assert api.requests[-1].resource == "nodes/status"


class TestRouting:
    """URL routing and unsupported requests."""

    @pytest.mark.parametrize("path", ["/api/v1/secrets", "/apis/apps/v1/deployments", "/api/v1/nodes/n/proxy",
                                      "/api/v1/namespaces/x/nodes", "/api/v1/pods/p", "/api/v1/storageclasses",
                                      "/apis/storage.k8s.io/v1/storageclasses/sc/status", "/nothing"])
    def test_not_served(self, api: FakeKubeApi, path: str) -> None:
        """Paths the fake does not serve get a 404 Status."""
        response = urllib3.request("GET", api.url + path)
        assert response.status == 404 and response.json()["kind"] == "Status"

    def test_method_not_allowed(self, api: FakeKubeApi) -> None:
        """A POST to an object URL is a 405."""
        assert urllib3.request("POST", api.url + "/api/v1/nodes/n", body=b"{}").status == 405

    def test_version(self, api: FakeKubeApi, raw: Any) -> None:
        """/version answers like an apiserver, so VersionApi works."""
        assert _data(kubernetes.client.VersionApi(raw).get_code(_preload_content=False))["major"] == "1"

    def test_all_resources(self, raw: Any) -> None:
        """Every served resource can be created through its typed client method."""
        core = kubernetes.client.CoreV1Api(raw)
        _data(core.create_persistent_volume({"metadata": {"name": "pv"}}, _preload_content=False))
        _data(core.create_namespaced_persistent_volume_claim("ns", {"metadata": {"name": "c"}},
                                                             _preload_content=False))
        _data(kubernetes.client.StorageV1Api(raw).create_storage_class(
            {"metadata": {"name": "sc"}, "provisioner": "disk.csi.azure.com"}, _preload_content=False))
        leases = _data(kubernetes.client.CoordinationV1Api(raw).list_lease_for_all_namespaces(_preload_content=False))
        assert leases["kind"] == "LeaseList"


class TestOneWrite:
    """Each answer leaves in one write, headers and body together (two cost a syscall each, on both sides)."""

    @pytest.mark.parametrize(("method", "path", "code"), [
        ("GET", "/version", 200), ("GET", "/api/v1/nodes", 200), ("GET", "/api/v1/nodes/n", 200),
        ("GET", "/api/v1/nodes/missing", 404), ("PATCH", "/api/v1/nodes/n", 200)])
    def test_answers(self, api: FakeKubeApi, server_writes: list[int], method: str, path: str, code: int) -> None:
        """A get, a list, an error and a patch: one write each, larger than the body (the headers ride along)."""
        api.create("nodes", {"metadata": {"name": "n"}})
        response = urllib3.request(method, api.url + path, body=b'{"metadata":{"labels":{"a":"b"}}}',
                                   headers={"Content-Type": "application/merge-patch+json"})
        assert response.status == code
        assert len(server_writes) == 1 and server_writes[0] > len(response.data) > 0


class TestFaults:
    """Fault injection, latency, and the request log."""

    def test_fail_next(self, api: FakeKubeApi, raw: Any) -> None:
        """The next N matching requests fail with the status; then requests succeed again."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.fail_next("get", "nodes", status=503, count=2, retry_after=3)
        core = kubernetes.client.CoreV1Api(raw)
        for _ in range(2):
            code, body, headers = _error(lambda: core.read_node("n", _preload_content=False))
            assert (code, body["reason"], headers["Retry-After"]) == (503, "ServiceUnavailable", "3")
            assert body["details"]["retryAfterSeconds"] == 3
        assert _data(core.read_node("n", _preload_content=False))["metadata"]["name"] == "n"
        assert api.pending_faults() == []

    def test_fault_matches_verb_and_resource(self, api: FakeKubeApi, raw: Any) -> None:
        """A fault for patch on nodes leaves gets and other resources alone."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.fail_next("patch", "nodes", status=409)
        core = kubernetes.client.CoreV1Api(raw)
        _data(core.read_node("n", _preload_content=False))
        _data(core.list_namespaced_pod("x", _preload_content=False))
        assert len(api.pending_faults()) == 1

    def test_disconnect(self, api: FakeKubeApi, raw: Any) -> None:
        """disconnect=True closes the connection without an answer."""
        api.fail_next("list", "nodes", disconnect=True)
        with pytest.raises(urllib3.exceptions.ProtocolError):
            kubernetes.client.CoreV1Api(raw).list_node(_preload_content=False)

    def test_latency(self, api: FakeKubeApi, raw: Any) -> None:
        """Added latency delays matching requests only."""
        api.set_latency(0.3, verb="list")
        core = kubernetes.client.CoreV1Api(raw)
        start = time.monotonic()
        _data(core.list_node(_preload_content=False))
        assert time.monotonic() - start >= 0.3
        api.clear_faults()
        start = time.monotonic()
        _data(core.list_node(_preload_content=False))
        assert time.monotonic() - start < 0.3

    def test_request_log(self, api: FakeKubeApi, raw: Any) -> None:
        """Requests are logged with verb, resource, namespace, name, query and status; count() filters."""
        api.create("nodes", {"metadata": {"name": "n"}})
        core = kubernetes.client.CoreV1Api(raw)
        for label in ("a", "b"):
            _data(core.patch_node("n", {"metadata": {"labels": {label: "1"}}}, _preload_content=False,
                                  _content_type="application/merge-patch+json"))
        _data(core.list_node(label_selector="a", _preload_content=False))
        assert api.count("patch", "nodes") == 2 and api.count("list") == 1 and api.count(status=200) == 3
        last = api.requests[-1]
        assert (last.method, last.path, last.query) == ("GET", "/api/v1/nodes", {"labelSelector": "a"})
        assert api.wait_for_requests(2, "patch", "nodes", timeout=0)
        api.reset_requests()
        assert api.requests == []

    def test_in_process_writes_are_not_logged(self, api: FakeKubeApi) -> None:
        """Setting up objects in-process sends no request."""
        api.create("nodes", {"metadata": {"name": "n"}})
        assert api.requests == []

    def test_clock(self) -> None:
        """creationTimestamp comes from the injected clock."""
        moment = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
        with FakeKubeApi(clock=lambda: moment) as server:
            node = server.create("nodes", {"metadata": {"name": "n"}})
        assert node["metadata"]["creationTimestamp"] == "2024-05-01T12:00:00Z"


class TestOfficialWatch:
    """The official client's Watch helper works against the fake."""

    def test_watch_stream(self, api: FakeKubeApi, raw: Any) -> None:
        """kubernetes.watch.Watch sees ADDED, MODIFIED, DELETED and BOOKMARK in order."""
        api.create("nodes", {"metadata": {"name": "n"}})
        start = str(api.resource_version)
        core = kubernetes.client.CoreV1Api(raw)
        watcher = kubernetes.watch.Watch()

        def change() -> None:
            api.wait_for_watches(1)
            api.patch("nodes", "n", {"metadata": {"labels": {"a": "b"}}})
            api.create("nodes", {"metadata": {"name": "m"}})
            api.delete("nodes", "n")
            api.bookmark()

        thread = threading.Thread(target=change)
        thread.start()
        seen = []
        for event in watcher.stream(core.list_node, resource_version=start, allow_watch_bookmarks=True,
                                    timeout_seconds=10):
            seen.append((event["type"], event["raw_object"]["metadata"].get("name")))
            if event["type"] == "BOOKMARK":
                watcher.stop()
        thread.join()
        assert seen == [("MODIFIED", "n"), ("ADDED", "m"), ("DELETED", "n"), ("BOOKMARK", None)]
        assert watcher.resource_version == str(api.resource_version)

    def test_watch_410_raises(self, api: FakeKubeApi, raw: Any) -> None:
        """After compaction, the official Watch gives up with ApiException 410 (it retries once)."""
        api.create("nodes", {"metadata": {"name": "n"}})
        api.patch("nodes", "n", {"metadata": {"labels": {"a": "b"}}})
        api.compact()
        with pytest.raises(kubernetes.client.ApiException) as info:
            list(kubernetes.watch.Watch().stream(kubernetes.client.CoreV1Api(raw).list_node, resource_version="1"))
        assert info.value.status == 410
