"""Contract tests: `FakeKubeApi` and a real kube-apiserver v1.37 answer our requests the same way.

Every test runs twice, against the fake (``[fake]``) and against the session's real control plane
(``[real]``, marked ``controlplane``), through the same `Backend`. Where the fake knowingly differs
(the "Not served" section of ``cloudzones.testing.kubeapi``), the test in `TestKnownGaps` states what
each side does, so that a change on either side shows up here.
"""

from __future__ import annotations

import pytest

from cloudzones import errors, kube
from tests.kube_contract import (
    Backend,
    error_of,
    names_of,
    raw_error,
    seed_leases,
    seed_nodes,
    seed_pod,
)


class TestPaging:
    """limit and continue walk a list in pages, each as of the first page."""

    def test_pages_cover_the_list_once(self, backend: Backend) -> None:
        """Five nodes in pages of two: three pages, one version; a filtered list has no remainingItemCount."""
        names = seed_nodes(backend, "a", "b", "c", "d", "e")
        pages = list(backend.client.list_pages("nodes", label_selector=f"run={backend.suffix}", page_size=2))
        assert [names_of(page["items"]) for page in pages] == [names[:2], names[2:4], names[4:]]
        assert len({page["metadata"]["resourceVersion"] for page in pages}) == 1
        assert [page["metadata"].get("remainingItemCount") for page in pages] == [None, None, None]
        assert "continue" not in pages[-1]["metadata"]

    def test_later_pages_show_the_first_pages_snapshot(self, backend: Backend) -> None:
        """Objects created, changed or deleted after the first page do not show on later pages."""
        names = seed_nodes(backend, "a", "b", "c", "d")
        pages = backend.client.list_pages("nodes", label_selector=f"run={backend.suffix}", page_size=2)
        first = next(pages)
        backend.client.delete("nodes", names[3])
        backend.seed("nodes", {"metadata": {"name": backend.name("bb"), "labels": {"run": backend.suffix}}})
        backend.client.patch("nodes", names[2], {"metadata": {"labels": {"later": "yes"}}})
        rest = list(pages)
        assert names_of(first["items"]) + [n for page in rest for n in names_of(page["items"])] == names
        assert "later" not in rest[0]["items"][0]["metadata"]["labels"]

    def test_garbled_continue_is_400(self, backend: Backend) -> None:
        """A continue token the server did not issue is a 400 BadRequest."""
        code, body = raw_error(lambda: backend.core().list_node(limit=1, _continue="garbage",
                                                                 _preload_content=False))
        assert (code, body["reason"]) == (400, "BadRequest")


class TestWatch:
    """Watches replay from a resourceVersion, filter by selector and report progress with bookmarks."""

    def test_replay_from_a_version(self, backend: Backend) -> None:
        """A watch from a list's version sees every later change of the selected objects, in order."""
        seed_leases(backend, "a", "b")
        ns = backend.namespace
        start = backend.client.list("leases", namespace=ns)["metadata"]["resourceVersion"]
        backend.client.patch("leases", "a", {"metadata": {"labels": {"x": "1"}}}, namespace=ns)
        seed_leases(backend, "c")
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
        seed_leases(backend, "watched", "other")
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
        error = error_of(lambda: list(backend.client.watch("nodes", resource_version="abc", timeout_seconds=1)))
        assert error.status == 500 and 'Invalid value: "abc"' in str(error)


class TestConflicts:
    """Optimistic concurrency: stale writes get 409."""

    def test_stale_update(self, backend: Backend) -> None:
        """An update carrying an old resourceVersion is a 409 Conflict; the object keeps the first update."""
        lease = backend.seed("leases", {"metadata": {"name": backend.name("l")}, "spec": {"holderIdentity": "a"}})
        lease["spec"]["holderIdentity"] = "b"
        backend.client.update("leases", lease)
        lease["spec"]["holderIdentity"] = "c"
        error = error_of(lambda: backend.client.update("leases", lease))
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
        error = error_of(lambda: backend.client.update("leases", lease))
        assert (error.status, error.reason) == (422, "Invalid")
        assert str(error).endswith('leases.coordination.k8s.io "l" is invalid: metadata.resourceVersion: '
                                   "Invalid value: 0: must be specified for an update")

    def test_stale_patch(self, backend: Backend) -> None:
        """A patch carrying an old metadata.resourceVersion is a 409 Conflict too."""
        (name,) = seed_nodes(backend, "n")
        old = backend.client.get("nodes", name)["metadata"]["resourceVersion"]
        backend.client.patch("nodes", name, {"metadata": {"labels": {"x": "1"}}})
        error = error_of(lambda: backend.client.patch("nodes", name, {"metadata": {"resourceVersion": old,
                                                                                 "labels": {"x": "2"}}}))
        assert (error.status, error.reason) == (409, "Conflict")

    def test_create_taken_name(self, backend: Backend) -> None:
        """Creating a name that is taken is 409 AlreadyExists."""
        (name,) = seed_nodes(backend, "n")
        error = error_of(lambda: backend.client.create("nodes", {"metadata": {"name": name}}))
        assert isinstance(error, errors.KubeAlreadyExists) and error.reason == "AlreadyExists"

    def test_name_mismatch(self, backend: Backend) -> None:
        """An update whose body names another object than the URL is a 400."""
        (name,) = seed_nodes(backend, "n")
        code, body = raw_error(lambda: backend.core().replace_node(name, {"metadata": {"name": "other"}},
                                                                    _preload_content=False))
        assert (code, body["reason"]) == (400, "BadRequest")


class TestPatchTypes:
    """Merge, strategic merge and JSON patches give the same objects."""

    def test_merge_patch(self, backend: Backend) -> None:
        """A merge patch adds labels and removes the ones set to null."""
        (name,) = seed_nodes(backend, "n", keep="1", drop="1")
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
        error = error_of(lambda: backend.client.patch("nodes", name, {"spec": {"taints": [{"key": "a", "$patch": "delete"}]}},
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
        (name,) = seed_nodes(backend, "n")
        backend.client.patch("nodes", name, {"metadata": {"finalizers": ["example.com/c"]}}, patch_type="strategic")
        node = backend.client.patch("nodes", name, {"metadata": {"finalizers": ["example.com/d", "example.com/c"]}},
                                    patch_type="strategic")
        assert node["metadata"]["finalizers"] == ["example.com/d", "example.com/c"]
        node = backend.client.patch("nodes", name, {"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["example.com/c", "example.com/d"]}}, patch_type="strategic")
        assert "finalizers" not in node["metadata"]

    def test_json_patch(self, backend: Backend) -> None:
        """A JSON patch adds an escaped key; a failing test or a missing path is 422 Invalid and changes nothing."""
        seed_leases(backend, "l")
        ns = backend.namespace
        lease = backend.client.patch("leases", "l", [{"op": "add", "path": "/metadata/labels/example.com~1x",
                                                      "value": "1"}], namespace=ns, patch_type="json")
        assert lease["metadata"]["labels"]["example.com/x"] == "1"
        for operations in ([{"op": "test", "path": "/metadata/labels/run", "value": "nope"}],
                           [{"op": "remove", "path": "/metadata/labels/missing"}]):
            error = error_of(lambda ops=operations: backend.client.patch("leases", "l", ops, namespace=ns,
                                                                       patch_type="json"))
            assert (error.status, error.reason) == (422, "Invalid")
        current = backend.client.get("leases", "l", namespace=ns)
        assert current["metadata"]["resourceVersion"] == lease["metadata"]["resourceVersion"]

    def test_no_op_patch_keeps_the_version(self, backend: Backend) -> None:
        """A patch that changes nothing writes nothing: the resourceVersion stays."""
        seed_leases(backend, "l")
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
        assert names_of(found) == [backend.name(base) for base in expected]

    @pytest.mark.parametrize("selector", ["a in (b", "a=-x", f"a={'x' * 64}", "a===b"])
    def test_malformed_label_selector(self, backend: Backend, selector: str) -> None:
        """A selector that does not parse, or names an invalid value, is 400 BadRequest."""
        error = error_of(lambda: backend.client.list("nodes", label_selector=selector))
        assert (error.status, error.reason) == (400, "BadRequest")

    def test_field_selector_on_node_name(self, backend: Backend) -> None:
        """metadata.name selects one node; spec.unschedulable=false reads an absent field as false."""
        first, _second = seed_nodes(backend, "a", "b")
        assert names_of(backend.client.list("nodes", field_selector=f"metadata.name={first}")["items"]) == [first]
        found = backend.client.list("nodes", label_selector=f"run={backend.suffix}",
                                    field_selector="spec.unschedulable=false")["items"]
        assert len(found) == 2

    def test_field_selector_on_pod_node_name(self, backend: Backend) -> None:
        """spec.nodeName selects the pods bound to a node, = and != alike."""
        for pod, node in (("p1", "a"), ("p2", "b"), ("p3", "a")):
            backend.seed("pods", {"metadata": {"name": pod}, "spec": {
                "nodeName": backend.name(node), "containers": [{"name": "c", "image": "example.invalid/x"}]}})
        on_a = backend.client.list("pods", namespace=backend.namespace, field_selector=f"spec.nodeName={backend.name('a')}")
        assert names_of(on_a["items"]) == ["p1", "p3"]
        off_a = backend.client.list("pods", namespace=backend.namespace,
                                    field_selector=f"spec.nodeName!={backend.name('a')}")
        assert names_of(off_a["items"]) == ["p2"]

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
        error = error_of(lambda: backend.client.list(resource, namespace=namespace, field_selector=selector))
        assert (error.status, error.reason) == (400, "BadRequest") and str(error).endswith(message)


class TestStatusSubresource:
    """/status changes status (and metadata), never spec; the main resource never changes status."""

    def test_status_write_keeps_spec(self, backend: Backend) -> None:
        """A patch and an update of /status change status and labels; spec changes in them are ignored."""
        ns = backend.namespace
        seed_pod(backend, "p")
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
        seed_pod(backend, "p")
        pod = backend.client.patch("pods", "p", {"metadata": {"labels": {"a": "1"}}, "status": {"message": "patched"}},
                                   namespace=ns)
        assert pod["status"]["message"] == "seeded" and pod["metadata"]["labels"] == {"a": "1"}
        pod["status"]["message"] = "updated"
        pod["spec"]["activeDeadlineSeconds"] = 30
        pod = backend.client.update("pods", pod)
        assert pod["status"]["message"] == "seeded" and pod["spec"]["activeDeadlineSeconds"] == 30
