"""Contract tests: `FakeKubeApi` and a real kube-apiserver v1.37 answer our requests the same way.

Every test runs twice, against the fake (``[fake]``) and against the session's real control plane
(``[real]``, marked ``controlplane``), through the same `Backend`. Where the fake knowingly differs
(the "Not served" section of ``cloudzones.testing.kubeapi``), the test in `TestKnownGaps` states what
each side does, so that a change on either side shows up here.
"""

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


def _error(call: Callable[[], Any]) -> errors.KubeApiError:
    with pytest.raises(errors.KubeApiError) as info:
        call()
    return info.value


def _names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def _raw_error(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(kubernetes.client.ApiException) as info:
        call()
    return int(info.value.status or 0), json.loads(info.value.body)


def _nodes(backend: Backend, *bases: str, **labels: str) -> list[str]:
    names = [backend.name(base) for base in bases]
    for name in names:
        backend.seed("nodes", {"metadata": {"name": name, "labels": {"run": backend.suffix, **labels}}})
    return names


class TestPaging:
    """limit and continue walk a list in pages, each as of the first page."""

    def test_pages_cover_the_list_once(self, backend: Backend) -> None:
        """Five nodes in pages of two: three pages, one version; a filtered list has no remainingItemCount."""
        names = _nodes(backend, "a", "b", "c", "d", "e")
        pages = list(backend.client.list_pages("nodes", label_selector=f"run={backend.suffix}", page_size=2))
        assert [_names(page["items"]) for page in pages] == [names[:2], names[2:4], names[4:]]
        assert len({page["metadata"]["resourceVersion"] for page in pages}) == 1
        assert [page["metadata"].get("remainingItemCount") for page in pages] == [None, None, None]
        assert "continue" not in pages[-1]["metadata"]

    def test_later_pages_show_the_first_pages_snapshot(self, backend: Backend) -> None:
        """Objects created, changed or deleted after the first page do not show on later pages."""
        names = _nodes(backend, "a", "b", "c", "d")
        pages = backend.client.list_pages("nodes", label_selector=f"run={backend.suffix}", page_size=2)
        first = next(pages)
        backend.client.delete("nodes", names[3])
        backend.seed("nodes", {"metadata": {"name": backend.name("bb"), "labels": {"run": backend.suffix}}})
        backend.client.patch("nodes", names[2], {"metadata": {"labels": {"later": "yes"}}})
        rest = list(pages)
        assert _names(first["items"]) + [n for page in rest for n in _names(page["items"])] == names
        assert "later" not in rest[0]["items"][0]["metadata"]["labels"]

    def test_garbled_continue_is_400(self, backend: Backend) -> None:
        """A continue token the server did not issue is a 400 BadRequest."""
        code, body = _raw_error(lambda: backend.core().list_node(limit=1, _continue="garbage",
                                                                 _preload_content=False))
        assert (code, body["reason"]) == (400, "BadRequest")


def _leases(backend: Backend, *names: str) -> None:
    # Leases in the test's namespace: no controller of the real control plane touches them (nodes get
    # annotated by the TTL controller at any moment).
    for name in names:
        backend.seed("leases", {"metadata": {"name": name, "labels": {"run": backend.suffix}}, "spec": {}})


class TestWatch:
    """Watches replay from a resourceVersion, filter by selector and report progress with bookmarks."""

    def test_replay_from_a_version(self, backend: Backend) -> None:
        """A watch from a list's version sees every later change of the selected objects, in order."""
        _leases(backend, "a", "b")
        ns = backend.namespace
        start = backend.client.list("leases", namespace=ns)["metadata"]["resourceVersion"]
        backend.client.patch("leases", "a", {"metadata": {"labels": {"x": "1"}}}, namespace=ns)
        _leases(backend, "c")
        backend.client.delete("leases", "b", namespace=ns)
        backend.client.patch("leases", "a", {"metadata": {"labels": {"run": "elsewhere"}}}, namespace=ns)
        seen = []
        stream = backend.client.watch("leases", namespace=ns, resource_version=start,
                                      label_selector=f"run={backend.suffix}", timeout_seconds=10, bookmarks=False)
        for event in stream:
            seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == 4:
                stream.stop()
        # Leaving the selection shows as DELETED, as the apiserver's cacher reports it.
        assert seen == [("MODIFIED", "a"), ("ADDED", "c"), ("DELETED", "b"), ("DELETED", "a")]

    def test_bookmark_reports_progress_past_filtered_changes(self, backend: Backend) -> None:
        """A change the selector hides still moves the version: a BOOKMARK carries it before the timeout."""
        _leases(backend, "watched", "other")
        ns = backend.namespace
        start = backend.client.list("leases", namespace=ns)["metadata"]["resourceVersion"]
        # The stream is open (its headers arrived) before the write: the apiserver bookmarks only
        # changes it dispatches to an open watch.
        stream = backend.client.watch("leases", namespace=ns, resource_version=start,
                                      field_selector="metadata.name=watched", timeout_seconds=3)
        moved = backend.client.patch("leases", "other", {"metadata": {"labels": {"x": "1"}}},
                                     namespace=ns)["metadata"]["resourceVersion"]
        events = list(stream)
        assert events and {event.type for event in events} == {"BOOKMARK"}
        assert max(int(event.resource_version) for event in events) >= int(moved)

    def test_malformed_version(self, backend: Backend) -> None:
        """A resourceVersion that is not a number is refused with a 500 (sic) before the stream starts."""
        error = _error(lambda: list(backend.client.watch("nodes", resource_version="abc", timeout_seconds=1)))
        assert error.status == 500 and 'Invalid value: "abc"' in str(error)


class TestConflicts:
    """Optimistic concurrency: stale writes get 409."""

    def test_stale_update(self, backend: Backend) -> None:
        """An update carrying an old resourceVersion is a 409 Conflict; the object keeps the first update."""
        lease = backend.seed("leases", {"metadata": {"name": backend.name("l")}, "spec": {"holderIdentity": "a"}})
        lease["spec"]["holderIdentity"] = "b"
        backend.client.update("leases", lease)
        lease["spec"]["holderIdentity"] = "c"
        error = _error(lambda: backend.client.update("leases", lease))
        assert isinstance(error, errors.KubeConflict) and (error.status, error.reason) == (409, "Conflict")
        assert "the object has been modified" in str(error)
        current = backend.client.get("leases", lease["metadata"]["name"], namespace=backend.namespace)
        assert current["spec"]["holderIdentity"] == "b"

    def test_update_without_version(self, backend: Backend) -> None:
        """An update without a resourceVersion replaces a storage class, but is 422 for a lease (it must say one)."""
        sc = backend.seed("storageclasses", {"metadata": {"name": backend.name("sc")}, "provisioner": "example.com/a"})
        backend.client.patch("storageclasses", sc["metadata"]["name"], {"metadata": {"labels": {"x": "1"}}})
        del sc["metadata"]["resourceVersion"]
        assert backend.client.update("storageclasses", sc)["metadata"].get("labels") is None
        lease = backend.seed("leases", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
        del lease["metadata"]["resourceVersion"]
        error = _error(lambda: backend.client.update("leases", lease))
        assert (error.status, error.reason) == (422, "Invalid")
        assert str(error).endswith('leases.coordination.k8s.io "l" is invalid: metadata.resourceVersion: '
                                   "Invalid value: 0: must be specified for an update")

    def test_stale_patch(self, backend: Backend) -> None:
        """A patch carrying an old metadata.resourceVersion is a 409 Conflict too."""
        (name,) = _nodes(backend, "n")
        old = backend.client.get("nodes", name)["metadata"]["resourceVersion"]
        backend.client.patch("nodes", name, {"metadata": {"labels": {"x": "1"}}})
        error = _error(lambda: backend.client.patch("nodes", name, {"metadata": {"resourceVersion": old,
                                                                                 "labels": {"x": "2"}}}))
        assert (error.status, error.reason) == (409, "Conflict")

    def test_create_taken_name(self, backend: Backend) -> None:
        """Creating a name that is taken is 409 AlreadyExists."""
        (name,) = _nodes(backend, "n")
        error = _error(lambda: backend.client.create("nodes", {"metadata": {"name": name}}))
        assert isinstance(error, errors.KubeAlreadyExists) and error.reason == "AlreadyExists"

    def test_name_mismatch(self, backend: Backend) -> None:
        """An update whose body names another object than the URL is a 400."""
        (name,) = _nodes(backend, "n")
        code, body = _raw_error(lambda: backend.core().replace_node(name, {"metadata": {"name": "other"}},
                                                                    _preload_content=False))
        assert (code, body["reason"]) == (400, "BadRequest")


class TestPatchTypes:
    """Merge, strategic merge and JSON patches give the same objects."""

    def test_merge_patch(self, backend: Backend) -> None:
        """A merge patch adds labels and removes the ones set to null."""
        (name,) = _nodes(backend, "n", keep="1", drop="1")
        node = backend.client.patch("nodes", name, {"metadata": {"labels": {"drop": None, "new": "1"}}})
        assert node["metadata"]["labels"] == {"run": backend.suffix, "keep": "1", "new": "1"}

    def test_strategic_taints_are_replaced_whole(self, backend: Backend) -> None:
        """spec.taints is an atomic list: a strategic merge patch's taints replace all the node's taints."""
        name = backend.name("n")
        backend.seed("nodes", {"metadata": {"name": name},
                               "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
        node = backend.client.patch("nodes", name, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}},
                                    patch_type="strategic")
        assert node["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]

    def test_strategic_delete_directive_in_taints_is_invalid(self, backend: Backend) -> None:
        """$patch: delete means nothing in an atomic list: the element stays, without an effect, and is refused."""
        name = backend.name("n")
        backend.seed("nodes", {"metadata": {"name": name}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
        error = _error(lambda: backend.client.patch("nodes", name, {"spec": {"taints": [{"key": "a", "$patch": "delete"}]}},
                                                    patch_type="strategic"))
        assert (error.status, error.reason) == (422, "Invalid")
        assert "taints[0].effect: Required value" in str(error)

    def test_strategic_conditions_merge_by_type(self, backend: Backend) -> None:
        """Conditions merge by type; the patch's lead and server-only ones slot in before what they preceded."""
        name = backend.name("n")
        backend.seed("nodes", {"metadata": {"name": name}, "status": {"conditions": [
            {"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}})
        node = backend.client.patch("nodes", name, {"status": {"conditions": [
            {"type": "C", "status": "True"}, {"type": "B", "status": "False"}]}},
            patch_type="strategic", subresource="status")
        assert [(c["type"], c["status"]) for c in node["status"]["conditions"]] == [
            ("C", "True"), ("A", "True"), ("B", "False")]

    def test_strategic_finalizers_merge_as_a_set(self, backend: Backend) -> None:
        """finalizers gain the patch's entries first; $deleteFromPrimitiveList removes; an emptied list is gone."""
        (name,) = _nodes(backend, "n")
        backend.client.patch("nodes", name, {"metadata": {"finalizers": ["example.com/c"]}}, patch_type="strategic")
        node = backend.client.patch("nodes", name, {"metadata": {"finalizers": ["example.com/d", "example.com/c"]}},
                                    patch_type="strategic")
        assert node["metadata"]["finalizers"] == ["example.com/d", "example.com/c"]
        node = backend.client.patch("nodes", name, {"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["example.com/c", "example.com/d"]}}, patch_type="strategic")
        assert "finalizers" not in node["metadata"]

    def test_json_patch(self, backend: Backend) -> None:
        """A JSON patch adds an escaped key; a failing test or a missing path is 422 Invalid and changes nothing."""
        _leases(backend, "l")
        ns = backend.namespace
        lease = backend.client.patch("leases", "l", [{"op": "add", "path": "/metadata/labels/example.com~1x",
                                                      "value": "1"}], namespace=ns, patch_type="json")
        assert lease["metadata"]["labels"]["example.com/x"] == "1"
        for operations in ([{"op": "test", "path": "/metadata/labels/run", "value": "nope"}],
                           [{"op": "remove", "path": "/metadata/labels/missing"}]):
            error = _error(lambda ops=operations: backend.client.patch("leases", "l", ops, namespace=ns,
                                                                       patch_type="json"))
            assert (error.status, error.reason) == (422, "Invalid")
        current = backend.client.get("leases", "l", namespace=ns)
        assert current["metadata"]["resourceVersion"] == lease["metadata"]["resourceVersion"]

    def test_no_op_patch_keeps_the_version(self, backend: Backend) -> None:
        """A patch that changes nothing writes nothing: the resourceVersion stays."""
        _leases(backend, "l")
        before = backend.client.get("leases", "l", namespace=backend.namespace)["metadata"]["resourceVersion"]
        after = backend.client.patch("leases", "l", {"metadata": {"labels": {"run": backend.suffix}}},
                                     namespace=backend.namespace)
        assert after["metadata"]["resourceVersion"] == before


class TestSelectors:
    """Label and field selectors choose the same objects and refuse the same mistakes."""

    @pytest.mark.parametrize(("selector", "expected"), [
        ("tier=web", ["a"]), ("tier==web", ["a"]), ("tier!=web", ["b", "c"]), ("tier in (web,db)", ["a", "b"]),
        ("tier notin (web)", ["b", "c"]), ("tier", ["a", "b"]), ("!tier", ["c"]), ("tier,zone=1", ["a"]),
    ])
    def test_label_selectors(self, backend: Backend, selector: str, expected: list[str]) -> None:
        """Equality, set and existence requirements, joined by commas."""
        for base, labels in (("a", {"tier": "web", "zone": "1"}), ("b", {"tier": "db"}), ("c", {})):
            backend.seed("nodes", {"metadata": {"name": backend.name(base), "labels": {"run": backend.suffix, **labels}}})
        found = backend.client.list("nodes", label_selector=f"run={backend.suffix},{selector}")["items"]
        assert _names(found) == [backend.name(base) for base in expected]

    @pytest.mark.parametrize("selector", ["a in (b", "a=-x", f"a={'x' * 64}", "a===b"])
    def test_malformed_label_selector(self, backend: Backend, selector: str) -> None:
        """A selector that does not parse, or names an invalid value, is 400 BadRequest."""
        error = _error(lambda: backend.client.list("nodes", label_selector=selector))
        assert (error.status, error.reason) == (400, "BadRequest")

    def test_field_selector_on_node_name(self, backend: Backend) -> None:
        """metadata.name selects one node; spec.unschedulable=false reads an absent field as false."""
        first, _second = _nodes(backend, "a", "b")
        assert _names(backend.client.list("nodes", field_selector=f"metadata.name={first}")["items"]) == [first]
        found = backend.client.list("nodes", label_selector=f"run={backend.suffix}",
                                    field_selector="spec.unschedulable=false")["items"]
        assert len(found) == 2

    def test_field_selector_on_pod_node_name(self, backend: Backend) -> None:
        """spec.nodeName selects the pods bound to a node, = and != alike."""
        for pod, node in (("p1", "a"), ("p2", "b"), ("p3", "a")):
            backend.seed("pods", {"metadata": {"name": pod}, "spec": {
                "nodeName": backend.name(node), "containers": [{"name": "c", "image": "example.invalid/x"}]}})
        on_a = backend.client.list("pods", namespace=backend.namespace, field_selector=f"spec.nodeName={backend.name('a')}")
        assert _names(on_a["items"]) == ["p1", "p3"]
        off_a = backend.client.list("pods", namespace=backend.namespace,
                                    field_selector=f"spec.nodeName!={backend.name('a')}")
        assert _names(off_a["items"]) == ["p2"]

    @pytest.mark.parametrize(("resource", "selector", "message"), [
        ("nodes", "spec.foo=x", "field label not supported: spec.foo"),
        ("nodes", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        ("pods", "metadata.labels=x", "field label not supported: metadata.labels"),
        ("leases", "spec.holderIdentity=x",
         '"spec.holderIdentity" is not a known field selector: only "metadata.name", "metadata.namespace"'),
    ])
    def test_unsupported_field_label(self, backend: Backend, resource: str, selector: str, message: str) -> None:
        """A field the resource does not index is refused with 400, in the apiserver's words."""
        namespace = backend.namespace if kube.RESOURCES[resource].namespaced else None
        error = _error(lambda: backend.client.list(resource, namespace=namespace, field_selector=selector))
        assert (error.status, error.reason) == (400, "BadRequest") and str(error).endswith(message)


def _pod(backend: Backend, name: str) -> dict[str, Any]:
    # Bound to a node that does not exist: no scheduler, kubelet or controller writes to it during a test.
    return backend.seed("pods", {"metadata": {"name": name}, "spec": {
        "nodeName": backend.name("nowhere"), "containers": [{"name": "c", "image": "example.invalid/x"}]},
        "status": {"phase": "Pending", "message": "seeded"}})


class TestStatusSubresource:
    """/status changes status (and metadata), never spec; the main resource never changes status."""

    def test_status_write_keeps_spec(self, backend: Backend) -> None:
        """A patch and an update of /status change status and labels; spec changes in them are ignored."""
        ns = backend.namespace
        _pod(backend, "p")
        pod = backend.client.patch("pods", "p", {"metadata": {"labels": {"a": "1"}}, "spec": {"activeDeadlineSeconds": 30},
                                                 "status": {"message": "patched"}}, namespace=ns, subresource="status")
        assert pod["status"]["message"] == "patched" and pod["metadata"]["labels"] == {"a": "1"}
        assert "activeDeadlineSeconds" not in pod["spec"]
        pod["spec"]["activeDeadlineSeconds"] = 30
        pod["status"]["message"] = "updated"
        pod = backend.client.update("pods", pod, subresource="status")
        assert pod["status"]["message"] == "updated" and "activeDeadlineSeconds" not in pod["spec"]

    def test_main_write_keeps_status(self, backend: Backend) -> None:
        """An update or a patch of the pod itself ignores status changes."""
        ns = backend.namespace
        _pod(backend, "p")
        pod = backend.client.patch("pods", "p", {"metadata": {"labels": {"a": "1"}}, "status": {"message": "patched"}},
                                   namespace=ns)
        assert pod["status"]["message"] == "seeded" and pod["metadata"]["labels"] == {"a": "1"}
        pod["status"]["message"] = "updated"
        pod["spec"]["activeDeadlineSeconds"] = 30
        pod = backend.client.update("pods", pod)
        assert pod["status"]["message"] == "seeded" and pod["spec"]["activeDeadlineSeconds"] == 30


class TestValidation:
    """Bad names, labels, annotations and taints are 422 Invalid on create, update and patch."""

    @pytest.mark.parametrize("name", ["Bad_Name", "a" * 254, "-a", "a-", "a..b", "UPPER"])
    def test_bad_name(self, backend: Backend, name: str) -> None:
        """Names must be RFC 1123 subdomains of at most 253 characters."""
        error = _error(lambda: backend.client.create("nodes", {"metadata": {"name": name}}))
        assert (error.status, error.reason) == (422, "Invalid")
        assert f'Node "{name}" is invalid: metadata.name: Invalid value: "{name}"' in str(error)

    def test_longest_name(self, backend: Backend) -> None:
        """253 characters of dotted lowercase labels is a valid name."""
        name = ("a" * 60 + ".") * 3 + "b" * (253 - 183 - len(backend.suffix) - 1) + "-" + backend.suffix
        assert len(name) == 253
        assert backend.client.create("nodes", {"metadata": {"name": name}})["metadata"]["name"] == name

    def test_bad_generate_name(self, backend: Backend) -> None:
        """generateName is checked as a prefix: the generated name would be invalid."""
        error = _error(lambda: backend.client.create("nodes", {"metadata": {"generateName": "Bad_"}}))
        assert (error.status, error.reason) == (422, "Invalid") and 'metadata.generateName: Invalid value: "Bad_"' in str(error)

    @pytest.mark.parametrize("value", ["-x", "x-", "x" * 64, "a b", "a/b", "é"])
    def test_bad_label_value(self, backend: Backend, value: str) -> None:
        """Label values: at most 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric."""
        error = _error(lambda: backend.client.create("nodes", {"metadata": {"name": backend.name("n"),
                                                                            "labels": {"k": value}}}))
        assert (error.status, error.reason) == (422, "Invalid")
        assert f"metadata.labels: Invalid value: {json.dumps(value, ensure_ascii=False)}" in str(error)

    @pytest.mark.parametrize("key", ["a b", "-a", "a/b/c", "A.b/c", "a" * 64, "/a", "a/", f"{'a' * 254}/b"])
    def test_bad_label_key(self, backend: Backend, key: str) -> None:
        """Label keys: a name of at most 63 characters with an optional DNS subdomain prefix and '/'."""
        error = _error(lambda: backend.client.create("nodes", {"metadata": {"name": backend.name("n"),
                                                                            "labels": {key: "v"}}}))
        assert (error.status, error.reason) == (422, "Invalid") and "metadata.labels: Invalid value" in str(error)

    def test_good_labels(self, backend: Backend) -> None:
        """The edges of the rules are accepted: empty and 63-character values, prefixed keys."""
        labels = {"empty": "", "long": "x" * 63, "example.com/k_e.y-1": "A_b.c-9", "k" * 63: "v"}
        node = backend.client.create("nodes", {"metadata": {"name": backend.name("n"), "labels": labels}})
        assert node["metadata"]["labels"] == labels

    def test_bad_annotation_key(self, backend: Backend) -> None:
        """Annotation keys follow the label-key rules (their values are free)."""
        error = _error(lambda: backend.client.create("nodes", {"metadata": {
            "name": backend.name("n"), "annotations": {"a b": "any value at all"}}}))
        assert (error.status, error.reason) == (422, "Invalid") and "metadata.annotations" in str(error)

    def test_every_cause_is_reported(self, backend: Backend) -> None:
        """Several problems come back at once, in brackets, each as a cause with its field."""
        error = _error(lambda: backend.client.create("nodes", {"metadata": {"name": "Bad_Name", "labels": {"a": "-x"}}}))
        assert 'Node "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name"' in str(error)
        assert 'metadata.labels: Invalid value: "-x"' in str(error)

    def test_update_and_patch_are_checked(self, backend: Backend) -> None:
        """An update or a patch (of any type) that would store a bad label is refused and changes nothing."""
        _leases(backend, "l")
        ns = backend.namespace
        lease = backend.client.get("leases", "l", namespace=ns)
        lease["metadata"]["labels"]["bad"] = "x" * 64
        calls = [lambda: backend.client.update("leases", lease),
                 lambda: backend.client.patch("leases", "l", {"metadata": {"labels": {"bad": "-x"}}}, namespace=ns),
                 lambda: backend.client.patch("leases", "l", {"metadata": {"labels": {"bad": "-x"}}}, namespace=ns,
                                              patch_type="strategic"),
                 lambda: backend.client.patch("leases", "l", [{"op": "add", "path": "/metadata/labels/bad",
                                                               "value": "a b"}], namespace=ns, patch_type="json")]
        for call in calls:
            error = _error(call)
            assert (error.status, error.reason) == (422, "Invalid")
        assert "bad" not in backend.client.get("leases", "l", namespace=ns)["metadata"]["labels"]

    @pytest.mark.parametrize(("taint", "message"), [
        ({"key": "k"}, "taints[0].effect: Required value"),
        ({"key": "k", "effect": "Nope"}, 'taints[0].effect: Unsupported value: "Nope"'),
        ({"effect": "NoSchedule"}, 'taints[0].key: Invalid value: "": name part must be non-empty'),
    ])
    def test_bad_taint(self, backend: Backend, taint: dict[str, str], message: str) -> None:
        """A taint needs a key and one of NoSchedule, PreferNoSchedule, NoExecute."""
        (name,) = _nodes(backend, "n")
        error = _error(lambda: backend.client.patch("nodes", name, {"spec": {"taints": [taint]}}))
        assert (error.status, error.reason) == (422, "Invalid") and message in str(error)

    def test_create_with_a_resource_version(self, backend: Backend) -> None:
        """A create that carries a resourceVersion is refused, with a 500 (sic)."""
        code, body = _raw_error(lambda: backend.core().create_node(
            {"metadata": {"name": backend.name("n"), "resourceVersion": "5"}}, _preload_content=False))
        assert code == 500 and body["message"] == "resourceVersion should not be set on objects to be created"


class TestDelete:
    """What a delete answers, and finalizers."""

    def test_answers(self, backend: Backend) -> None:
        """Nodes and leases answer a Status of Success; pods, PVs and storage classes answer the object."""
        (node,) = _nodes(backend, "n")
        answer = backend.client.delete("nodes", node)
        assert (answer["kind"], answer["status"], answer["details"]["name"]) == ("Status", "Success", node)
        backend.seed("leases", {"metadata": {"name": "l"}, "spec": {}})
        answer = backend.client.delete("leases", "l", namespace=backend.namespace)
        assert answer["details"] == {"name": "l", "group": "coordination.k8s.io", "kind": "leases",
                                     "uid": answer["details"]["uid"]}
        backend.seed("storageclasses", {"metadata": {"name": backend.name("sc")}, "provisioner": "example.com/x"})
        answer = backend.client.delete("storageclasses", backend.name("sc"))
        assert (answer["kind"], answer["metadata"]["name"]) == ("StorageClass", backend.name("sc"))

    def test_finalizers_hold_the_object(self, backend: Backend) -> None:
        """With a finalizer a delete answers the object marked for deletion; dropping the finalizer removes it."""
        name = backend.name("n")
        backend.seed("nodes", {"metadata": {"name": name, "finalizers": ["example.com/hold"]}})
        marked = backend.client.delete("nodes", name)
        assert marked["kind"] == "Node" and marked["metadata"]["deletionTimestamp"]
        assert backend.client.delete("nodes", name)["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
        backend.client.patch("nodes", name, {"metadata": {"finalizers": None}})
        with pytest.raises(errors.KubeNotFound):
            backend.client.get("nodes", name)

    def test_stale_precondition(self, backend: Backend) -> None:
        """A delete at an old resourceVersion is a 409 and deletes nothing."""
        (name,) = _nodes(backend, "n")
        old = backend.client.get("nodes", name)["metadata"]["resourceVersion"]
        backend.client.patch("nodes", name, {"metadata": {"labels": {"x": "1"}}})
        error = _error(lambda: backend.client.delete("nodes", name, resource_version=old))
        assert error.status == 409 and backend.client.get("nodes", name)


class TestDiscovery:
    """The discovery documents name the served groups, versions and resources alike."""

    def test_core(self, backend: Backend) -> None:
        """/api lists v1; /api/v1 lists nodes (cluster-scoped, short name no), pods and their status subresources."""
        versions = json.loads(kubernetes.client.CoreApi(backend.client.api_client).get_api_versions(
            _preload_content=False).data)
        assert versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
        resources = {r["name"]: r for r in json.loads(backend.core().get_api_resources(_preload_content=False).data)
                     ["resources"]}
        assert (resources["nodes"]["kind"], resources["nodes"]["namespaced"]) == ("Node", False)
        assert "no" in resources["nodes"]["shortNames"] and resources["pods"]["namespaced"] is True
        assert {"get", "list", "watch", "create", "update", "patch", "delete"} <= set(resources["nodes"]["verbs"])
        assert {"get", "patch", "update"} == set(resources["nodes/status"]["verbs"])
        assert {"nodes", "pods", "persistentvolumes", "persistentvolumeclaims", "events"} <= set(resources)

    def test_groups(self, backend: Backend) -> None:
        """/apis lists storage.k8s.io and coordination.k8s.io at v1; their resource lists name their kinds."""
        groups = {g["name"]: g for g in json.loads(kubernetes.client.ApisApi(backend.client.api_client)
                                                     .get_api_versions(_preload_content=False).data)["groups"]}
        for group in ("storage.k8s.io", "coordination.k8s.io"):
            assert groups[group]["preferredVersion"] == {"groupVersion": f"{group}/v1", "version": "v1"}
        storage = json.loads(kubernetes.client.StorageV1Api(backend.client.api_client).get_api_resources(
            _preload_content=False).data)
        assert storage["groupVersion"] == "storage.k8s.io/v1"
        assert {r["name"]: r["kind"] for r in storage["resources"]}["storageclasses"] == "StorageClass"
        leases = json.loads(kubernetes.client.CoordinationV1Api(backend.client.api_client).get_api_resources(
            _preload_content=False).data)
        assert {r["name"]: r["namespaced"] for r in leases["resources"]}["leases"] is True


_NODE_MANIFEST = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{tier: {tier}}}
"""
_LEASE_MANIFEST = """
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: l
  namespace: {namespace}
spec:
  holderIdentity: {holder}
"""


class TestKubectl:
    """kubectl v1.37 gets, labels and applies (client-side) through discovery."""

    def test_get_nodes(self, backend: Backend) -> None:
        """kubectl get nodes lists the node by name."""
        (name,) = _nodes(backend, "n")
        result = backend.kubectl("get", "nodes", "-l", f"run={backend.suffix}")
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].split()[0] == "NAME" and name in result.stdout

    def test_label_node(self, backend: Backend) -> None:
        """kubectl label node adds a label; --overwrite changes it; key- removes it."""
        (name,) = _nodes(backend, "n")
        for args, expected in ((["zone=1"], "1"), (["zone=2", "--overwrite"], "2"), (["zone-"], None)):
            result = backend.kubectl("label", "node", name, *args)
            assert result.returncode == 0, result.stderr
            assert backend.client.get("nodes", name)["metadata"]["labels"].get("zone") == expected

    def test_apply_node(self, backend: Backend) -> None:
        """kubectl apply creates a node, leaves it unchanged, then patches a changed label in place."""
        name = backend.name("n")
        outputs = []
        for tier in ("web", "web", "db"):
            result = backend.kubectl("apply", "-f", "-", input=_NODE_MANIFEST.format(name=name, tier=tier))
            assert result.returncode == 0, result.stderr
            outputs.append(result.stdout.strip())
        assert outputs == [f"node/{name} created", f"node/{name} unchanged", f"node/{name} configured"]
        node = backend.client.get("nodes", name)
        assert node["metadata"]["labels"] == {"tier": "db"}
        assert "kubectl.kubernetes.io/last-applied-configuration" in node["metadata"]["annotations"]

    def test_apply_namespaced(self, backend: Backend) -> None:
        """kubectl apply creates and then updates a lease in its namespace."""
        for holder, word in (("a", "created"), ("b", "configured")):
            result = backend.kubectl("apply", "-f", "-", input=_LEASE_MANIFEST.format(namespace=backend.namespace,
                                                                                      holder=holder))
            assert result.returncode == 0, result.stderr
            assert result.stdout.strip() == f"lease.coordination.k8s.io/l {word}"
        assert backend.client.get("leases", "l", namespace=backend.namespace)["spec"]["holderIdentity"] == "b"


class TestKnownGaps:
    """Where the fake knowingly differs (the "Not served" list of kubeapi): each side's answer, pinned."""

    def test_namespaces_are_not_checked(self, backend: Backend) -> None:
        """The fake has no namespaces: a create in one that does not exist succeeds there, is a 404 on the apiserver."""
        body = {"metadata": {"name": "l"}, "spec": {}}
        missing = f"missing-{backend.suffix}"
        if backend.kind == "fake":
            assert backend.client.create("leases", body, namespace=missing)["metadata"]["namespace"] == missing
        else:
            error = _error(lambda: backend.client.create("leases", body, namespace=missing))
            assert isinstance(error, errors.KubeNotFound) and f'namespaces "{missing}" not found' in str(error)

    def test_no_defaulting_admission_or_field_managers(self, backend: Backend) -> None:
        """The fake stores what it is sent; the apiserver defaults fields and admits (a new node is tainted not-ready)."""
        node = backend.client.create("nodes", {"metadata": {"name": backend.name("n")}})
        pod = backend.client.create("pods", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "example.invalid/x"}]}}, namespace=backend.namespace)
        if backend.kind == "fake":
            assert "spec" not in node
            assert pod["spec"] == {"containers": [{"name": "c", "image": "example.invalid/x"}]}
        else:
            assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]
            assert pod["spec"]["restartPolicy"] == "Always" and pod["status"]["phase"] == "Pending"

    def test_bookmark_without_progress(self, backend: Backend) -> None:
        """At timeoutSeconds the fake always sends a last BOOKMARK, at the start version if nothing moved; the
        apiserver only bookmarks a version past the watcher's, after a change of that resource."""
        name = backend.name("sc")
        backend.seed("storageclasses", {"metadata": {"name": name}, "provisioner": "example.com/x"})
        start = backend.client.list("storageclasses", field_selector=f"metadata.name={name}")["metadata"]["resourceVersion"]
        events = list(backend.client.watch("storageclasses", resource_version=start,
                                           field_selector=f"metadata.name={name}", timeout_seconds=3))
        if backend.kind == "fake":
            assert [(e.type, e.resource_version) for e in events] == [("BOOKMARK", start)]
        else:
            # Nothing of ours changed, so no bookmark, unless another writer moved storage classes meanwhile.
            assert all(e.type == "BOOKMARK" and int(e.resource_version) > int(start) for e in events)

    def test_history_is_forgotten_on_request(self, backend: Backend) -> None:
        """FakeKubeApi.compact() makes older watches 410 Gone at once; the apiserver's watch cache forgets by age
        (minutes), so within a test it replays from an old version."""
        _leases(backend, "l")
        ns = backend.namespace
        start = backend.client.list("leases", namespace=ns)["metadata"]["resourceVersion"]
        backend.client.patch("leases", "l", {"metadata": {"labels": {"x": "1"}}}, namespace=ns)
        if backend.fake is not None:
            backend.fake.compact()
        stream = backend.client.watch("leases", namespace=ns, resource_version=start, timeout_seconds=5,
                                      bookmarks=False)
        if backend.kind == "fake":
            error = _error(lambda: list(stream))
            assert isinstance(error, errors.KubeGone) and (error.status, error.reason) == (410, "Expired")
        else:
            for event in stream:
                assert (event.type, event.object["metadata"]["labels"]["x"]) == ("MODIFIED", "1")
                stream.stop()

    def test_server_side_apply(self, backend: Backend) -> None:
        """Server-side apply is 415 on the fake; the apiserver applies."""
        (name,) = _nodes(backend, "n")
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"applied": "yes"}}}
        apply = lambda: backend.core().patch_node(  # noqa: E731
            name, body, field_manager="contract", _content_type="application/apply-patch+yaml", _preload_content=False)
        if backend.kind == "fake":
            code, body = _raw_error(apply)
            assert code == 415
        else:
            assert json.loads(apply().data)["metadata"]["labels"]["applied"] == "yes"

    def test_kubectl_get_columns(self, backend: Backend) -> None:
        """The fake serves no Table: kubectl prints NAME and AGE only; the apiserver's table adds STATUS, ROLES..."""
        (name,) = _nodes(backend, "n")
        header = backend.kubectl("get", "node", name).stdout.splitlines()[0].split()
        assert header == (["NAME", "AGE"] if backend.kind == "fake" else ["NAME", "STATUS", "ROLES", "AGE", "VERSION"])

    def test_kind_specific_validation(self, backend: Backend) -> None:
        """The fake checks metadata and node taints only: an Event whose involvedObject is in another namespace
        passes there, is 422 on the apiserver."""
        body = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "elsewhere"},
                "reason": "R", "message": "m"}
        if backend.kind == "fake":
            assert backend.client.create("events", body, namespace=backend.namespace)["metadata"]["name"] == "e"
        else:
            error = _error(lambda: backend.client.create("events", body, namespace=backend.namespace))
            assert (error.status, error.reason) == (422, "Invalid") and "involvedObject.namespace" in str(error)
