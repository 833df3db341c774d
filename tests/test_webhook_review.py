"""Tests for the pure admission review of PersistentVolumes."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones import errors, labels
from cloudzones.services.webhook.review import MalformedReview, patch_for, review
from tests.conftest import fixture_body

ZONED = {labels.REGION: "westus2", labels.ZONE: "westus2-1", labels.BETA_REGION: "westus2", labels.BETA_ZONE: "westus2-1"}


def request(**changes: Any) -> dict[str, Any]:
    """The in-tree azureDisk CREATE review fixture, optionally changed."""
    body = copy.deepcopy(fixture_body("admission/pv-create-azuredisk.json"))
    body["request"].update(changes)
    return body


def apply(answer: dict[str, Any], pv: dict[str, Any]) -> dict[str, Any]:
    """Apply the answer's JSON patch to the PV, as the API server would."""
    ops = json.loads(base64.b64decode(answer["response"]["patch"]))
    return jsonpatch.apply_patch(pv, ops)


def csi_pv() -> dict[str, Any]:
    """A CSI PV with an existing node affinity on another key."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-csi", "labels": {"team": "a"}},
            "spec": {"csi": {"driver": "disk.csi.azure.com", "volumeHandle": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]},
                         {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}]}}}}


class TestReview:
    """review answers every well-formed AdmissionReview."""

    def test_in_tree_pv_patched(self) -> None:
        """Labels and a zone+region affinity term are added; the uid and version are echoed."""
        body = request()
        answer = review(body, labels_for_volume=lambda pv: ZONED)
        assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
        assert answer["response"]["uid"] == body["request"]["uid"] and answer["response"]["allowed"] is True
        assert answer["response"]["patchType"] == "JSONPatch"
        patched = apply(answer, body["request"]["object"])
        assert patched["metadata"]["labels"] == ZONED
        assert patched["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [{"matchExpressions": [
            {"key": labels.ZONE, "operator": "In", "values": ["westus2-1"]},
            {"key": labels.REGION, "operator": "In", "values": ["westus2"]}]}]

    def test_csi_pv_existing_terms_merged(self) -> None:
        """Each existing OR-ed term gains the zone requirement; existing labels are kept (keys escaped ~1)."""
        pv = csi_pv()
        answer = review(request(object=pv), labels_for_volume=lambda pv: ZONED)
        ops = json.loads(base64.b64decode(answer["response"]["patch"]))
        assert any(op["path"] == "/metadata/labels/topology.kubernetes.io~1zone" for op in ops)
        patched = apply(answer, pv)
        assert patched["metadata"]["labels"] == {"team": "a", **ZONED}
        for term in patched["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]:
            keys = [e["key"] for e in term["matchExpressions"]]
            assert labels.ZONE in keys and labels.REGION in keys and len(keys) == 3

    def test_unzoned_region_only(self) -> None:
        """A region-only answer adds only the region requirement."""
        answer = review(request(), labels_for_volume=lambda pv: {labels.REGION: "westus2", labels.BETA_REGION: "westus2"})
        patched = apply(answer, request()["request"]["object"])
        assert patched["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == [
            {"key": labels.REGION, "operator": "In", "values": ["westus2"]}]

    def test_non_azure_pv_untouched(self) -> None:
        """{} from the labeller → allowed, no patch keys at all."""
        answer = review(request(), labels_for_volume=lambda pv: {})
        assert answer["response"] == {"uid": request()["request"]["uid"], "allowed": True}

    @pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
    def test_only_create(self, operation: str) -> None:
        """Other operations pass through without asking the cloud."""
        def explode(pv: Any) -> dict[str, str]:
            raise AssertionError("must not be called")
        assert "patch" not in review(request(operation=operation), labels_for_volume=explode)["response"]

    def test_trusts_labelled_pv(self) -> None:
        """A PV that already carries zone and region labels is trusted."""
        body = request()
        body["request"]["object"]["metadata"]["labels"] = {labels.BETA_ZONE: "westus2-2", labels.REGION: "westus2"}
        assert "patch" not in review(body, labels_for_volume=lambda pv: ZONED)["response"]

    def test_unreadable_disk_fail_open(self) -> None:
        """A cloud error → allowed with a warning naming the PV."""
        def broken(pv: Any) -> dict[str, str]:
            raise errors.CloudApiError("ARM get disk failed with HTTP 500", status=500)
        answer = review(request(), labels_for_volume=broken)
        assert answer["response"]["allowed"] is True and "pvc-1" in answer["response"]["warnings"][0]
        assert len(answer["response"]["warnings"][0]) <= 120

    def test_unreadable_disk_fail_closed(self) -> None:
        """With fail_closed the PV is denied with the reason."""
        def broken(pv: Any) -> dict[str, str]:
            raise errors.CloudApiError("throttled", status=429)
        answer = review(request(), labels_for_volume=broken, fail_closed=True)
        assert answer["response"]["allowed"] is False and "throttled" in answer["response"]["status"]["message"]

    def test_v1beta1_echoed(self) -> None:
        """The answer uses the request's version."""
        body = request()
        body["apiVersion"] = "admission.k8s.io/v1beta1"
        assert review(body, labels_for_volume=lambda pv: {})["apiVersion"] == "admission.k8s.io/v1beta1"

    @pytest.mark.parametrize("body", [b"", b"{", b"[]", b'{"kind": "Pod"}', b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
                                      b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}', b"\xff\xfe"])
    def test_malformed(self, body: bytes) -> None:
        """Bodies that are not AdmissionReviews raise MalformedReview with a reason."""
        with pytest.raises(MalformedReview):
            review(body, labels_for_volume=lambda pv: ZONED)

    @settings(max_examples=150, deadline=None)
    @given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                        max_leaves=12))
    def test_fuzz_object(self, junk: Any) -> None:
        """Any object in a well-formed envelope gets a valid answer with the uid."""
        body = request(object=junk)
        answer = review(body, labels_for_volume=lambda pv: ZONED)
        assert answer["response"]["uid"] == body["request"]["uid"] and answer["response"]["allowed"] is True
        if "patch" in answer["response"] and isinstance(junk, dict):
            apply(answer, junk)


METADATA_SHAPES = [None, {}, {"labels": None}, {"labels": "x"}, {"labels": {}}, {"labels": {"team": "a"}},
                   {"labels": {labels.ZONE: "westus2-1"}}]
SPEC_SHAPES = [None, {}, {"nodeAffinity": None}, {"nodeAffinity": []}, {"nodeAffinity": {}},
               {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "pool", "operator": "In", "values": ["b"]}]}]}}}]
LABEL_SETS = [ZONED, {labels.REGION: "westus2", labels.ZONE: "westus2-3"}, {labels.REGION: "westus2"},
              {"team": "b"}]


class TestEncodedPatch:
    """The patch a review carries is `patch_for`'s, whether or not its encoding was remembered."""

    @pytest.mark.parametrize("metadata", METADATA_SHAPES)
    @pytest.mark.parametrize("spec", SPEC_SHAPES)
    def test_every_shape(self, metadata: Any, spec: Any) -> None:
        """Each PV shape, under each label set in turn (zones alternate, so a stale memo shows)."""
        pv: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume"}
        if metadata is not None:
            pv["metadata"] = copy.deepcopy(metadata)
        if spec is not None:
            pv["spec"] = copy.deepcopy(spec)
        for found in LABEL_SETS * 2:
            answer = review(request(object=pv), labels_for_volume=lambda pv, found=found: found)
            ops = json.loads(base64.b64decode(answer["response"]["patch"])) if "patch" in answer["response"] else []
            assert ops == patch_for(pv, found)

    def test_long_values_not_remembered(self) -> None:
        """Labels no API server would accept (a 100,000-character zone) are answered but not remembered."""
        from cloudzones.services.webhook import review as reviews

        huge = {labels.REGION: "westus2", labels.ZONE: "westus2-" + "9" * 100_000}
        before = reviews._plain_patch.cache_info().currsize
        answer = review(request(), labels_for_volume=lambda pv: huge)
        assert json.loads(base64.b64decode(answer["response"]["patch"])) == patch_for(request()["request"]["object"],
                                                                                      huge)
        assert reviews._plain_patch.cache_info().currsize == before
