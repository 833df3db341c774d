"""Tests for the fake API server's pure parts: label and field selectors, the three patch formats, tree copies."""

from __future__ import annotations

import collections
import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones.testing import _kube_patch as patches
from cloudzones.testing import _kube_selectors as selectors
from cloudzones.testing._json_tree import copy_tree, to_json


def _node(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "n", "labels": labels}, "spec": {"nodeName": "x", "unschedulable": True}}


class TestLabelSelector:
    """label_matcher reads selectors the way the apiserver does."""

    @pytest.mark.parametrize(
        ("selector", "labels", "expected"),
        [
            ("a=b", {"a": "b"}, True),
            ("a==b", {"a": "b"}, True),
            ("a=b", {"a": "c"}, False),
            ("a!=b", {"a": "c"}, True),
            ("a!=b", {}, True),
            ("a!=b", {"a": "b"}, False),
            ("a in (b, c)", {"a": "c"}, True),
            ("a in (b,c)", {"a": "d"}, False),
            ("a in (b,c)", {}, False),
            ("a notin (b,c)", {"a": "d"}, True),
            ("a notin (b,c)", {}, True),
            ("a notin (b,c)", {"a": "b"}, False),
            ("a", {"a": ""}, True),
            ("a", {}, False),
            ("!a", {}, True),
            ("!a", {"a": "x"}, False),
            ("topology.kubernetes.io/zone=eastus-1,kubernetes.azure.com/managed!=false",
             {"topology.kubernetes.io/zone": "eastus-1"}, True),
            ("x in (1,2),y notin (3),z,!w", {"x": "2", "z": "q"}, True),
            ("x in (1,2),y notin (3),z,!w", {"x": "2", "z": "q", "w": "1"}, False),
            ("", {}, True),
            ("a=", {"a": ""}, True),
        ],
    )
    def test_requirements(self, selector: str, labels: dict[str, str], expected: bool) -> None:
        """Each operator selects exactly the objects the apiserver would."""
        assert selectors.label_matcher(selector)(_node(**labels)) is expected

    @pytest.mark.parametrize("selector", ["a in (b", "a in b)", "a >> b", "a in ()", "=b", "a b"])
    def test_malformed(self, selector: str) -> None:
        """A selector that cannot be parsed raises SelectorError quoting it."""
        with pytest.raises(selectors.SelectorError):
            selectors.label_matcher(selector)

    def test_object_without_labels(self) -> None:
        """An object with no metadata.labels has no labels (and null labels count as none)."""
        assert selectors.label_matcher("!a")({"metadata": {"labels": None}})
        assert not selectors.label_matcher("a")({})


class TestFieldSelector:
    """field_matcher compares dotted paths as strings."""

    @pytest.mark.parametrize(
        ("selector", "expected"),
        [("metadata.name=n", True), ("metadata.name!=n", False), ("spec.nodeName==x", True),
         ("spec.nodeName=", False), ("spec.missing=", True), ("spec.unschedulable=true", True),
         ("metadata.name=n,spec.nodeName!=y", True)],
    )
    def test_paths(self, selector: str, expected: bool) -> None:
        """Missing fields read as an empty string; booleans as true/false."""
        assert selectors.field_matcher(selector)(_node()) is expected

    def test_malformed(self) -> None:
        """A requirement without an operator is refused."""
        with pytest.raises(selectors.SelectorError, match=r"metadata\.name"):
            selectors.field_matcher("metadata.name")


class TestMergePatch:
    """merge_patch follows RFC 7386."""

    @pytest.mark.parametrize(
        ("target", "patch", "expected"),
        [  # the examples of RFC 7386 appendix A
            ({"a": "b"}, {"a": "c"}, {"a": "c"}),
            ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
            ({"a": "b"}, {"a": None}, {}),
            ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
            ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
            ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
            ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
            ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
            (["a", "b"], ["c", "d"], ["c", "d"]),
            ({"a": "b"}, ["c"], ["c"]),
            ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
            ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
            ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ],
    )
    def test_rfc_examples(self, target: Any, patch: Any, expected: Any) -> None:
        """Every example of the RFC gives the RFC's result."""
        assert patches.merge_patch(target, patch) == expected

    def test_target_untouched(self) -> None:
        """The target is not modified."""
        target = {"a": {"b": 1}}
        patches.merge_patch(target, {"a": {"b": 2}})
        assert target == {"a": {"b": 1}}


class TestStrategicMergePatch:
    """strategic_merge_patch merges the lists Kubernetes merges by key."""

    def test_maps_merge_and_null_deletes(self) -> None:
        """Maps merge like a merge patch; null removes a key."""
        result = patches.strategic_merge_patch({"metadata": {"labels": {"a": "1", "b": "2"}}},
                                               {"metadata": {"labels": {"b": None, "c": "3"}}})
        assert result == {"metadata": {"labels": {"a": "1", "c": "3"}}}

    def test_containers_merge_by_name(self) -> None:
        """Containers merge by name: the patched one changes, the others stay, new ones are appended."""
        pod = {"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}}
        result = patches.strategic_merge_patch(pod, {"spec": {"containers": [{"name": "b", "image": "y:2"},
                                                                             {"name": "c", "image": "z"}]}})
        assert result["spec"]["containers"] == [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"},
                                                {"name": "c", "image": "z"}]

    def test_delete_directive(self) -> None:
        """$patch: delete inside a keyed list removes that element."""
        node = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}}
        result = patches.strategic_merge_patch(node, {"status": {"conditions": [{"type": "A", "$patch": "delete"}]}})
        assert result["status"]["conditions"] == [{"type": "B", "status": "True"}]

    def test_taints_are_atomic(self) -> None:
        """Node taints have no merge key in the API: the patch's list replaces the whole list, directives dropped."""
        node = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]}}
        result = patches.strategic_merge_patch(node, {"spec": {"taints": [{"key": "c", "effect": "NoExecute"}]}})
        assert result["spec"]["taints"] == [{"key": "c", "effect": "NoExecute"}]
        result = patches.strategic_merge_patch(node, {"spec": {"taints": [{"key": "a", "$patch": "delete"}]}})
        assert result["spec"]["taints"] == [{"key": "a"}]

    def test_merged_order_follows_the_apiserver(self) -> None:
        """The patch's elements lead; server-only ones slot in before a patched element they preceded (as observed)."""
        node = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}}
        result = patches.strategic_merge_patch(node, {"status": {"conditions": [{"type": "C", "status": "True"},
                                                                                {"type": "B", "status": "False"}]}})
        assert [(c["type"], c["status"]) for c in result["status"]["conditions"]] == [
            ("C", "True"), ("A", "True"), ("B", "False")]
        assert patches.strategic_merge_patch({"metadata": {"finalizers": ["c"]}},
                                             {"metadata": {"finalizers": ["d"]}}) == {"metadata": {"finalizers": ["d", "c"]}}

    def test_set_element_order(self) -> None:
        """$setElementOrder orders the patched elements; the directive itself is not stored."""
        pod = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}
        result = patches.strategic_merge_patch(pod, {"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "2"}, {"name": "b", "image": "2"}]}})
        assert result == {"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "a", "image": "2"}]}}

    def test_replace_directive(self) -> None:
        """$patch: replace on a map replaces it whole."""
        result = patches.strategic_merge_patch({"metadata": {"labels": {"a": "1"}}},
                                               {"metadata": {"labels": {"$patch": "replace", "b": "2"}}})
        assert result == {"metadata": {"labels": {"b": "2"}}}

    def test_finalizers_merge_as_a_set(self) -> None:
        """finalizers gain new entries without duplicates; $deleteFromPrimitiveList removes."""
        obj = {"metadata": {"finalizers": ["a", "b"]}}
        assert patches.strategic_merge_patch(obj, {"metadata": {"finalizers": ["b", "c"]}}) == {
            "metadata": {"finalizers": ["a", "b", "c"]}}
        assert patches.strategic_merge_patch(obj, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}) == {
            "metadata": {"finalizers": ["b"]}}

    def test_other_lists_replace(self) -> None:
        """A list without a merge key (tolerations, args) is replaced."""
        result = patches.strategic_merge_patch({"spec": {"tolerations": [{"key": "a"}]}},
                                               {"spec": {"tolerations": [{"key": "b"}]}})
        assert result == {"spec": {"tolerations": [{"key": "b"}]}}

    def test_missing_merge_key(self) -> None:
        """An element of a keyed list without its key is refused."""
        with pytest.raises(patches.PatchError, match="name"):
            patches.strategic_merge_patch({"spec": {"containers": [{"name": "a"}]}},
                                          {"spec": {"containers": [{"image": "x"}]}})


_json = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("abc/~", max_size=2), inner,
                                                                                 max_size=3),
                     max_leaves=8)


def _pointers(doc: Any, prefix: str = "") -> list[str]:
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _pointers(value, f"{prefix}/{key.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += _pointers(value, f"{prefix}/{index}")
    return found


class TestJsonPatch:
    """json_patch follows RFC 6902 (checked against the jsonpatch library)."""

    @settings(max_examples=80, deadline=None)
    @given(doc=st.dictionaries(st.text("abc/~", max_size=2), _json, max_size=4), data=st.data())
    def test_agrees_with_jsonpatch(self, doc: dict[str, Any], data: st.DataObject) -> None:
        """Random operations on random documents give jsonpatch's result, or fail where it fails."""
        paths = _pointers(doc)
        ops = []
        for _ in range(data.draw(st.integers(1, 3))):
            op = data.draw(st.sampled_from(["add", "remove", "replace", "test", "copy", "move"]))
            path = data.draw(st.sampled_from(paths))
            ops.append({"op": op, "path": path, "value": data.draw(_json), "from": data.draw(st.sampled_from(paths))})
        try:
            expected = jsonpatch.apply_patch(doc, ops)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, IndexError):
            with pytest.raises(patches.PatchError):
                patches.json_patch(doc, ops)
            return
        assert patches.json_patch(doc, ops) == expected

    def test_escaped_label_key(self) -> None:
        """~1 in a pointer is a slash: the way a label key is addressed."""
        result = patches.json_patch({"metadata": {"labels": {}}},
                                    [{"op": "add", "path": "/metadata/labels/topology.kubernetes.io~1zone",
                                      "value": "eastus-1"}])
        assert result == {"metadata": {"labels": {"topology.kubernetes.io/zone": "eastus-1"}}}

    @pytest.mark.parametrize("ops", [{"op": "add"}, [{"op": "frobnicate", "path": "/a"}], [{"op": "add", "path": "a"}],
                                     [{"op": "add", "path": "/a"}], [{"op": "move", "path": "/a"}]])
    def test_malformed(self, ops: Any) -> None:
        """Malformed operations are refused with PatchError."""
        with pytest.raises(patches.PatchError):
            patches.json_patch({"a": 1}, ops)


def _json_values(numbers: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Small JSON-shaped values whose numbers come from ``numbers``."""
    return st.recursive(st.none() | st.booleans() | numbers | st.text(max_size=5),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                    max_size=4),
                        max_leaves=30)


JSON = _json_values(st.integers() | st.floats(allow_nan=False))
ORJSON_WRITABLE = _json_values(st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False))
"""JSON values orjson writes as they are: integers within 64 bits, finite floats."""


def _containers(value: Any) -> list[int]:
    """The ids of every dict and list inside ``value``."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


class TestCopyTree:
    """copy_tree copies JSON-shaped data as deepcopy does, and leaves other objects to deepcopy."""

    @settings(max_examples=200, deadline=None)
    @given(JSON)
    def test_equal_and_unshared(self, value: Any) -> None:
        """The copy equals the original and shares none of its dicts and lists."""
        copied = copy_tree(value)
        assert copied == copy.deepcopy(value)
        assert not set(_containers(copied)) & set(_containers(value))

    def test_other_objects_deep_copied(self) -> None:
        """A tuple or an OrderedDict (a caller's, in-process) is deep-copied, its type kept."""
        inner = {"a": [1]}
        value = {"t": (inner,), "o": collections.OrderedDict(x=inner)}
        copied = copy_tree(value)
        assert type(copied["o"]) is collections.OrderedDict and copied == value
        assert copied["t"][0] is not inner and copied["o"]["x"] is not inner

    def test_pruned_writes_share_nothing(self) -> None:
        """What the store keeps of a written body (pruned) shares no part of it, odd leaves included."""
        from cloudzones.testing._kube_store import _prune_nulls

        inner = {"a": [1]}
        body = {"metadata": {"name": "n", "labels": {}}, "spec": {"list": [inner], "tuple": (inner,), "gone": None}}
        kept = _prune_nulls(body)
        assert kept == {"metadata": {"name": "n"}, "spec": {"list": [{"a": [1]}], "tuple": ({"a": [1]},)}}
        assert kept["spec"]["list"][0] is not inner and kept["spec"]["tuple"][0] is not inner


class TestToJson:
    """to_json writes what the stdlib would mean, and still writes what orjson refuses."""

    @settings(max_examples=200, deadline=None)
    @given(ORJSON_WRITABLE)
    def test_reads_back_equal(self, value: Any) -> None:
        """JSON that reads back as the value (whatever orjson writes, it writes exactly)."""
        assert json.loads(to_json(value)) == value

    @pytest.mark.parametrize("value", [{"big": 2**70}, {"text": "\ud800"}, {1: "a"}],
                             ids=["integer past 64 bits", "lone surrogate", "integer key"])
    def test_what_orjson_refuses(self, value: Any) -> None:
        """The stdlib's JSON for the values orjson cannot write (a hostile test may store them)."""
        assert to_json(value) == json.dumps(value, separators=(",", ":")).encode()
