"""Tests for the matching rules behind plan_spread: label selectors, node affinity, taints and tolerations."""

from __future__ import annotations

from typing import Any

import pytest
from placement_helpers import expr

from cloudzones import errors
from cloudzones.placement import selectors


class TestLabelSelector:
    """parse_label_selector follows metav1.LabelSelectorAsSelector."""

    @pytest.mark.parametrize(("selector", "labels", "expected"), [
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "1"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        ({"matchExpressions": [expr("app", "In", "web", "api")]}, {"app": "api"}, True),
        ({"matchExpressions": [expr("app", "NotIn", "web")]}, {}, True),
        ({"matchExpressions": [expr("app", "NotIn", "web")]}, {"app": "web"}, False),
        ({"matchExpressions": [expr("app", "Exists")]}, {"app": ""}, True),
        ({"matchExpressions": [expr("app", "DoesNotExist")]}, {"app": ""}, False),
        ({"matchLabels": {"app": "web"}, "matchExpressions": [expr("tier", "Exists")]}, {"app": "web"}, False),
        ({}, {"anything": "x"}, True),
    ])
    def test_matches(self, selector: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
        """Requirements are ANDed; NotIn holds when the key is absent; {} selects everything."""
        assert selectors.parse_label_selector(selector).matches(labels) is expected

    def test_nil_selects_nothing_and_empty_is_empty(self) -> None:
        """A nil selector matches nothing (labels.Nothing); {} is empty (counts no pods in the scheduler)."""
        nil = selectors.parse_label_selector(None)
        assert nil.nothing and not nil.matches({}) and not nil.empty
        assert selectors.parse_label_selector({}).empty

    def test_with_labels_keeps_nothing(self) -> None:
        """Merging matchLabelKeys into a nil selector leaves it matching nothing, as mergeLabelSetWithSelector does."""
        assert selectors.parse_label_selector(None).with_labels({"h": "1"}).nothing
        merged = selectors.parse_label_selector({}).with_labels({"h": "1"})
        assert merged.matches({"h": "1"}) and not merged.matches({"h": "2"}) and not merged.empty

    def test_malformed_is_refused(self) -> None:
        """A selector that is not a mapping is refused with its value."""
        with pytest.raises(errors.InvalidPlacementSpec, match="'zone'"):
            selectors.parse_label_selector("zone")  # type: ignore[arg-type]


def _pod(node_selector: dict[str, str] | None = None, terms: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return {"spec": spec}


class TestRequiredNodeAffinity:
    """required_node_affinity: nodeSelector AND ORed terms, malformed terms never match."""

    def test_node_selector_and_terms_combine(self) -> None:
        """nodeSelector must hold and at least one term must match."""
        affinity = selectors.required_node_affinity(_pod({"disk": "ssd"}, [
            {"matchExpressions": [expr("zone", "In", "z1")]}, {"matchExpressions": [expr("zone", "In", "z2")]}]))
        assert affinity.matches("n", {"disk": "ssd", "zone": "z2"})
        assert not affinity.matches("n", {"disk": "hdd", "zone": "z2"})
        assert not affinity.matches("n", {"disk": "ssd", "zone": "z3"})

    @pytest.mark.parametrize(("operator", "value", "label", "expected"), [
        ("Gt", "5", "6", True), ("Gt", "5", "5", False), ("Lt", "5", "-3", True), ("Lt", "5", "x", False),
        ("Gt", "5", "٦", False),
    ])
    def test_gt_lt_compare_integers(self, operator: str, value: str, label: str, expected: bool) -> None:
        """Gt/Lt compare the label as a base-10 ASCII integer; anything else does not match."""
        affinity = selectors.required_node_affinity(_pod(terms=[{"matchExpressions": [expr("cpu", operator, value)]}]))
        assert affinity.matches("n", {"cpu": label}) is expected

    def test_match_fields_on_node_name(self) -> None:
        """matchFields metadata.name selects by node name."""
        affinity = selectors.required_node_affinity(_pod(terms=[{"matchFields": [expr("metadata.name", "In", "n1")]}]))
        assert affinity.matches("n1", {}) and not affinity.matches("n2", {})

    def test_malformed_term_never_matches_but_others_do(self) -> None:
        """A term with a bad requirement is dropped (parse errors are ignored upstream); other terms still count."""
        affinity = selectors.required_node_affinity(_pod(terms=[
            {"matchExpressions": [expr("zone", "Gt", "z1")]}, {"matchExpressions": [expr("zone", "Exists")]}]))
        assert affinity.matches("n", {"zone": "z1"})
        broken = selectors.required_node_affinity(_pod(terms=[{"matchExpressions": [expr("zone", "In")]}]))
        assert not broken.matches("n", {"zone": "z1"})

    def test_empty_term_list_matches_nothing(self) -> None:
        """A required node affinity with no terms (or only empty terms) selects no node."""
        assert not selectors.required_node_affinity(_pod(terms=[])).matches("n", {})
        assert not selectors.required_node_affinity(_pod(terms=[{}])).matches("n", {})
        assert selectors.required_node_affinity(_pod()).matches("n", {})


def _node(*taints: dict[str, str]) -> dict[str, Any]:
    return {"spec": {"taints": list(taints)}}


class TestTaints:
    """has_untolerated_taint mirrors Toleration.ToleratesTaint for NoSchedule/NoExecute taints."""

    @pytest.mark.parametrize(("taint", "tolerations", "untolerated"), [
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, [], True),
        ({"key": "k", "value": "v", "effect": "PreferNoSchedule"}, [], False),
        ({"key": "k", "value": "v", "effect": "NoExecute"}, [{"key": "k", "operator": "Exists"}], False),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, [{"key": "k", "value": "v"}], False),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, [{"key": "k", "value": "w"}], True),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, [{"operator": "Exists"}], False),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, [{"key": "k", "operator": "Exists",
                                                              "effect": "NoExecute"}], True),
        ({"key": "k", "effect": "NoSchedule"}, [{"key": "k", "operator": "Lt"}], True),
    ])
    def test_tolerations(self, taint: dict[str, str], tolerations: list[dict[str, str]], untolerated: bool) -> None:
        """Effect, key, operator and value rules; PreferNoSchedule never blocks; unknown operators tolerate nothing."""
        assert selectors.has_untolerated_taint(_node(taint), tolerations) is untolerated


class TestVolumeNodeAffinity:
    """A PV's nodeAffinity is read with the pod rules (Gt on integer labels included)."""

    def test_unzoned_disk_terms(self) -> None:
        """The unzoned-disk affinity admits fault domains 0 and 36 and no zoned node; no affinity admits all."""
        from cloudzones.placement.selectors import volume_node_affinity
        from storageclass import volume_topology

        _, affinity = volume_topology(None, "eastus")
        parsed = volume_node_affinity(affinity)
        region = {"topology.kubernetes.io/region": "eastus"}
        assert parsed.matches("a", {**region, "topology.kubernetes.io/zone": "0"})
        assert parsed.matches("b", {**region, "topology.kubernetes.io/zone": "36"})
        assert not parsed.matches("c", {**region, "topology.kubernetes.io/zone": "eastus-1"})
        assert volume_node_affinity(None).matches("d", {})
