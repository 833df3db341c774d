"""Contract tests, continued: validation, deletion, discovery, kubectl, and the fake's named gaps (see test_kube_contract)."""

from __future__ import annotations

import json

import kubernetes.client
import pytest

from cloudzones import errors
from tests.kube_contract import (
    Backend,
    error_of,
    raw_error,
    seed_leases,
    seed_nodes,
)


class TestValidation:
    """Bad names, labels, annotations and taints are 422 Invalid on create, update and patch."""

    @pytest.mark.parametrize("name", ["Bad_Name", "a" * 254, "-a", "a-", "a..b", "UPPER"])
    def test_bad_name(self, backend: Backend, name: str) -> None:
        """Names must be RFC 1123 subdomains of at most 253 characters."""
        error = error_of(lambda: backend.client.create("nodes", {"metadata": {"name": name}}))
        assert (error.status, error.reason) == (422, "Invalid")
        assert f'Node "{name}" is invalid: metadata.name: Invalid value: "{name}"' in str(error)

    def test_longest_name(self, backend: Backend) -> None:
        """253 characters of dotted lowercase labels is a valid name."""
        name = ("a" * 60 + ".") * 3 + "b" * (253 - 183 - len(backend.suffix) - 1) + "-" + backend.suffix
        assert len(name) == 253
        assert backend.client.create("nodes", {"metadata": {"name": name}})["metadata"]["name"] == name

    def test_bad_generate_name(self, backend: Backend) -> None:
        """generateName is checked as a prefix: the generated name would be invalid."""
        error = error_of(lambda: backend.client.create("nodes", {"metadata": {"generateName": "Bad_"}}))
        assert (error.status, error.reason) == (422, "Invalid") and 'metadata.generateName: Invalid value: "Bad_"' in str(error)

    @pytest.mark.parametrize("value", ["-x", "x-", "x" * 64, "a b", "a/b", "é"])
    def test_bad_label_value(self, backend: Backend, value: str) -> None:
        """Label values: at most 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric."""
        error = error_of(lambda: backend.client.create("nodes", {"metadata": {"name": backend.name("n"),
                                                                            "labels": {"k": value}}}))
        assert (error.status, error.reason) == (422, "Invalid")
        assert f"metadata.labels: Invalid value: {json.dumps(value, ensure_ascii=False)}" in str(error)

    @pytest.mark.parametrize("key", ["a b", "-a", "a/b/c", "A.b/c", "a" * 64, "/a", "a/", f"{'a' * 254}/b"])
    def test_bad_label_key(self, backend: Backend, key: str) -> None:
        """Label keys: a name of at most 63 characters with an optional DNS subdomain prefix and '/'."""
        error = error_of(lambda: backend.client.create("nodes", {"metadata": {"name": backend.name("n"),
                                                                            "labels": {key: "v"}}}))
        assert (error.status, error.reason) == (422, "Invalid") and "metadata.labels: Invalid value" in str(error)

    def test_good_labels(self, backend: Backend) -> None:
        """The edges of the rules are accepted: empty and 63-character values, prefixed keys."""
        labels = {"empty": "", "long": "x" * 63, "example.com/k_e.y-1": "A_b.c-9", "k" * 63: "v"}
        node = backend.client.create("nodes", {"metadata": {"name": backend.name("n"), "labels": labels}})
        assert node["metadata"]["labels"] == labels

    def test_bad_annotation_key(self, backend: Backend) -> None:
        """Annotation keys follow the label-key rules (their values are free)."""
        error = error_of(lambda: backend.client.create("nodes", {"metadata": {
            "name": backend.name("n"), "annotations": {"a b": "any value at all"}}}))
        assert (error.status, error.reason) == (422, "Invalid") and "metadata.annotations" in str(error)

    def test_every_cause_is_reported(self, backend: Backend) -> None:
        """Several problems come back at once, in brackets, each as a cause with its field."""
        error = error_of(lambda: backend.client.create("nodes", {"metadata": {"name": "Bad_Name", "labels": {"a": "-x"}}}))
        assert 'Node "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name"' in str(error)
        assert 'metadata.labels: Invalid value: "-x"' in str(error)

    def test_update_and_patch_are_checked(self, backend: Backend) -> None:
        """An update or a patch (of any type) that would store a bad label is refused and changes nothing."""
        seed_leases(backend, "l")
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
            error = error_of(call)
            assert (error.status, error.reason) == (422, "Invalid")
        assert "bad" not in backend.client.get("leases", "l", namespace=ns)["metadata"]["labels"]

    @pytest.mark.parametrize(("taint", "message"), [
        ({"key": "k"}, "taints[0].effect: Required value"),
        ({"key": "k", "effect": "Nope"}, 'taints[0].effect: Unsupported value: "Nope"'),
        ({"effect": "NoSchedule"}, 'taints[0].key: Invalid value: "": name part must be non-empty'),
    ])
    def test_bad_taint(self, backend: Backend, taint: dict[str, str], message: str) -> None:
        """A taint needs a key and one of NoSchedule, PreferNoSchedule, NoExecute."""
        (name,) = seed_nodes(backend, "n")
        error = error_of(lambda: backend.client.patch("nodes", name, {"spec": {"taints": [taint]}}))
        assert (error.status, error.reason) == (422, "Invalid") and message in str(error)

    def test_create_with_a_resource_version(self, backend: Backend) -> None:
        """A create that carries a resourceVersion is refused, with a 500 (sic)."""
        code, body = raw_error(lambda: backend.core().create_node(
            {"metadata": {"name": backend.name("n"), "resourceVersion": "5"}}, _preload_content=False))
        assert code == 500 and body["message"] == "resourceVersion should not be set on objects to be created"


class TestDelete:
    """What a delete answers, and finalizers."""

    def test_answers(self, backend: Backend) -> None:
        """Nodes and leases answer a Status of Success; pods, PVs and storage classes answer the object."""
        (node,) = seed_nodes(backend, "n")
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
        (name,) = seed_nodes(backend, "n")
        old = backend.client.get("nodes", name)["metadata"]["resourceVersion"]
        backend.client.patch("nodes", name, {"metadata": {"labels": {"x": "1"}}})
        error = error_of(lambda: backend.client.delete("nodes", name, resource_version=old))
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
        (name,) = seed_nodes(backend, "n")
        result = backend.kubectl("get", "nodes", "-l", f"run={backend.suffix}")
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].split()[0] == "NAME" and name in result.stdout

    def test_label_node(self, backend: Backend) -> None:
        """kubectl label node adds a label; --overwrite changes it; key- removes it."""
        (name,) = seed_nodes(backend, "n")
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
            error = error_of(lambda: backend.client.create("leases", body, namespace=missing))
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
        seed_leases(backend, "l")
        ns = backend.namespace
        start = backend.client.list("leases", namespace=ns)["metadata"]["resourceVersion"]
        backend.client.patch("leases", "l", {"metadata": {"labels": {"x": "1"}}}, namespace=ns)
        if backend.fake is not None:
            backend.fake.compact()
        stream = backend.client.watch("leases", namespace=ns, resource_version=start, timeout_seconds=5,
                                      bookmarks=False)
        if backend.kind == "fake":
            error = error_of(lambda: list(stream))
            assert isinstance(error, errors.KubeGone) and (error.status, error.reason) == (410, "Expired")
        else:
            for event in stream:
                assert (event.type, event.object["metadata"]["labels"]["x"]) == ("MODIFIED", "1")
                stream.stop()

    def test_server_side_apply(self, backend: Backend) -> None:
        """Server-side apply is 415 on the fake; the apiserver applies."""
        (name,) = seed_nodes(backend, "n")
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"applied": "yes"}}}
        apply = lambda: backend.core().patch_node(  # noqa: E731
            name, body, field_manager="contract", _content_type="application/apply-patch+yaml", _preload_content=False)
        if backend.kind == "fake":
            code, body = raw_error(apply)
            assert code == 415
        else:
            assert json.loads(apply().data)["metadata"]["labels"]["applied"] == "yes"

    def test_kubectl_get_columns(self, backend: Backend) -> None:
        """The fake serves no Table: kubectl prints NAME and AGE only; the apiserver's table adds STATUS, ROLES..."""
        (name,) = seed_nodes(backend, "n")
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
            error = error_of(lambda: backend.client.create("events", body, namespace=backend.namespace))
            assert (error.status, error.reason) == (422, "Invalid") and "involvedObject.namespace" in str(error)
