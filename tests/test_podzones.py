"""Tests for cloudzones.podzones: which zone annotations a pod gets from its node's labels."""

from __future__ import annotations

from typing import Any

import pytest

from cloudzones import errors, labels, podzones

NODE = {labels.ZONE: "eastus-2", labels.REGION: "eastus", "kubernetes.io/hostname": "n1"}


def _pod(*, node: str | None = "n1", annotations: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "apps", "uid": "u-1"}, "spec": {}}
    if node:
        pod["spec"]["nodeName"] = node
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    pod.update(extra)
    return pod


class TestDecide:
    """podzones.decide."""

    def test_bound_pod(self) -> None:
        """A bound pod without annotations gets one per key plus the combined value, zone first."""
        decision = podzones.decide(_pod(), NODE)
        assert decision.action is podzones.Action.PATCH
        assert decision.node == "n1"
        assert dict(decision.patch) == {labels.ZONE: "eastus-2", labels.REGION: "eastus",
                                        labels.POD_ZONES: "eastus-2_eastus"}

    def test_key_order_and_join(self) -> None:
        """Several keys are joined with '_' in the order given, not sorted."""
        keys = ("kubernetes.io/hostname", labels.ZONE, labels.REGION)
        decision = podzones.decide(_pod(), NODE, keys=keys, combined="x/zones")
        assert decision.patch["x/zones"] == "n1_eastus-2_eastus"
        assert list(decision.patch) == [*keys, "x/zones"]

    def test_unbound(self) -> None:
        """A pod without spec.nodeName is skipped whatever the node labels."""
        assert podzones.decide(_pod(node=None), NODE).action is podzones.Action.SKIP

    @pytest.mark.parametrize("extra", [{"metadata": {"name": "p", "deletionTimestamp": "2024-01-01T00:00:00Z"}},
                                       {"status": {"phase": "Succeeded"}}, {"status": {"phase": "Failed"}}])
    def test_finished(self, extra: dict[str, Any]) -> None:
        """Terminating and finished pods are skipped."""
        assert podzones.decide(_pod(**extra), NODE).action is podzones.Action.SKIP

    def test_unknown_node(self) -> None:
        """No labels at all (node unknown) means wait for the node."""
        decision = podzones.decide(_pod(), None)
        assert (decision.action, decision.node) == (podzones.Action.WAIT_NODE, "n1")

    def test_missing_and_empty_labels(self) -> None:
        """A lacking or empty label makes the decision wait, naming the keys in order; nothing is written."""
        decision = podzones.decide(_pod(), {labels.REGION: "", "other": "x"})
        assert decision.action is podzones.Action.WAIT_LABELS
        assert decision.missing == (labels.ZONE, labels.REGION)
        assert not decision.patch

    def test_partial_labels_write_nothing(self) -> None:
        """With one of two keys present, no annotation is written (no partial set)."""
        decision = podzones.decide(_pod(), {labels.ZONE: "eastus-1"})
        assert (decision.action, decision.missing, dict(decision.patch)) == (
            podzones.Action.WAIT_LABELS, (labels.REGION,), {})

    def test_already_annotated(self) -> None:
        """Equal annotations need nothing."""
        present = {labels.ZONE: "eastus-2", labels.REGION: "eastus", labels.POD_ZONES: "eastus-2_eastus"}
        decision = podzones.decide(_pod(annotations=present), NODE)
        assert (decision.action, dict(decision.patch), dict(decision.conflicts)) == (podzones.Action.NOTHING, {}, {})

    def test_never_overwrites(self) -> None:
        """A different existing value is reported as a conflict and kept; the missing keys are still added."""
        decision = podzones.decide(_pod(annotations={labels.ZONE: "westus-1", "unrelated": "1"}), NODE)
        assert decision.action is podzones.Action.PATCH
        assert dict(decision.patch) == {labels.REGION: "eastus", labels.POD_ZONES: "eastus-2_eastus"}
        assert dict(decision.conflicts) == {labels.ZONE: ("westus-1", "eastus-2")}

    def test_only_conflicts(self) -> None:
        """When every key exists with other values there is nothing to patch, only conflicts."""
        present = {labels.ZONE: "a", labels.REGION: "b", labels.POD_ZONES: "c"}
        decision = podzones.decide(_pod(annotations=present), NODE)
        assert decision.action is podzones.Action.NOTHING
        assert set(decision.conflicts) == set(present)


class TestHelpers:
    """Key validation, patch, projection and message."""

    @pytest.mark.parametrize(("keys", "combined", "match"), [
        ((), labels.POD_ZONES, "at least one"),
        (("",), labels.POD_ZONES, "empty"),
        ((" a",), labels.POD_ZONES, "spaces"),
        (("a", "a"), labels.POD_ZONES, "twice"),
        (("a",), "a", "differ"),
        (("a",), "", "non-empty"),
    ])
    def test_validate_keys_refuses(self, keys: tuple[str, ...], combined: str, match: str) -> None:
        """Bad key lists are ConfigErrors that say what is wrong."""
        with pytest.raises(errors.ConfigError, match=match):
            podzones.validate_keys(keys, combined)

    def test_validate_keys_accepts(self) -> None:
        """A good list comes back as a tuple in the same order."""
        assert podzones.validate_keys(iter(["b", "a"]), "c") == ("b", "a")

    def test_annotation_patch(self) -> None:
        """The merge patch only touches metadata.annotations."""
        assert podzones.annotation_patch({"a": "1"}) == {"metadata": {"annotations": {"a": "1"}}}

    def test_projection(self) -> None:
        """The projection keeps identity, node, our annotations, terminating and finished state only."""
        pod = _pod(annotations={labels.ZONE: "z", "big": "x" * 100}, status={"phase": "Running", "podIP": "1"})
        pod["metadata"]["labels"] = {"app": "a"}
        assert podzones.project_pod(pod, (labels.ZONE, labels.POD_ZONES)) == {
            "metadata": {"name": "p", "namespace": "apps", "uid": "u-1", "annotations": {labels.ZONE: "z"}},
            "spec": {"nodeName": "n1"}}
        done = _pod(node=None, status={"phase": "Failed"})
        done["metadata"]["deletionTimestamp"] = "t"
        assert podzones.project_pod(done, ()) == {
            "metadata": {"name": "p", "namespace": "apps", "uid": "u-1", "deletionTimestamp": "t"},
            "spec": {"nodeName": ""}, "status": {"phase": "Failed"}}

    def test_projection_decides_alike(self) -> None:
        """Deciding on the projection gives the same answer as on the full pod."""
        pod = _pod(annotations={labels.REGION: "eastus", "other": "1"})
        projected = podzones.project_pod(pod, (labels.ZONE, labels.REGION, labels.POD_ZONES))
        assert podzones.decide(projected, NODE) == podzones.decide(pod, NODE)

    def test_message(self) -> None:
        """The missing-label message names the node and every key."""
        assert podzones.missing_labels_message("n1", (labels.ZONE,)) == (
            "node \"n1\" has no value for the label 'topology.kubernetes.io/zone'; the pod's zone "
            "annotations are written once it has")
        assert "labels 'a', 'b'" in podzones.missing_labels_message("n1", ("a", "b"))
