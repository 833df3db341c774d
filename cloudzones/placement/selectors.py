"""Kubernetes matching rules the spread planner needs: label selectors, required node affinity, taints.

Each mirrors the apimachinery / component-helpers behaviour on plain manifest dicts, including the
odd corners (a nil selector matches nothing, ``{}`` matches everything, a malformed node-affinity
term never matches instead of failing the pod).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from cloudzones import errors

_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NO_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_INT64 = (-(2**63), 2**63 - 1)


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One ``key operator values`` test on a label set."""

    key: str
    operator: str
    """``In``, ``NotIn``, ``Exists``, ``DoesNotExist`` (``Gt``/``Lt`` only in node selectors)."""
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (``NotIn`` holds when the key is absent)."""
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        # Gt / Lt: both sides must be integers, otherwise the requirement does not hold.
        value = _parse_int64(labels.get(self.key))
        bound = _parse_int64(next(iter(self.values)))
        if value is None or bound is None:
            return False
        return value > bound if self.operator == "Gt" else value < bound


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A parsed ``metav1.LabelSelector``: requirements ANDed together."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    """True for an absent (nil) selector, which matches no object at all."""

    @property
    def empty(self) -> bool:
        """True for ``{}``: it matches every object, yet kube-scheduler counts no pods with it."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object carrying ``labels`` is selected."""
        return not self.nothing and all(r.matches(labels) for r in self.requirements)

    def with_labels(self, extra: Mapping[str, str]) -> LabelSelector:
        """This selector ANDed with ``key=value`` for each of ``extra`` (how ``matchLabelKeys`` merges)."""
        if self.nothing or not extra:
            return self
        added = tuple(Requirement(k, "In", frozenset({v})) for k, v in sorted(extra.items()))
        return LabelSelector(added + self.requirements)


def parse_label_selector(selector: Mapping[str, Any] | None, *, where: str = "labelSelector") -> LabelSelector:
    """Parse a ``{matchLabels, matchExpressions}`` mapping; `InvalidPlacementSpec` when it is malformed."""
    if selector is None:
        return LabelSelector(nothing=True)
    if not isinstance(selector, Mapping):
        raise errors.InvalidPlacementSpec(f"{where} must be a mapping, got {selector!r}")
    requirements: list[Requirement] = []
    for key, value in sorted(_mapping(selector.get("matchLabels"), f"{where}.matchLabels").items()):
        requirements.append(Requirement(str(key), "In", frozenset({_label_value(value, where)})))
    for index, expression in enumerate(_sequence(selector.get("matchExpressions"), f"{where}.matchExpressions")):
        path = f"{where}.matchExpressions[{index}]"
        requirement = _parse_requirement(expression, path, _SELECTOR_OPERATORS)
        if isinstance(requirement, str):
            raise errors.InvalidPlacementSpec(requirement)
        requirements.append(requirement)
    return LabelSelector(tuple(requirements))


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """The ``metadata.labels`` of a manifest (``{}`` when absent)."""
    metadata = obj.get("metadata") or {}
    return {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}


@dataclasses.dataclass(frozen=True)
class NodeAffinity:
    """A pod's required node placement: ``spec.nodeSelector`` AND its required node-affinity terms."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[tuple[tuple[Requirement, ...], tuple[Requirement, ...]], ...] | None = None
    """``(label requirements, field requirements)`` per valid term, ORed; None when the pod has none."""

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Whether a node named ``node_name`` carrying ``labels`` satisfies the pod's requirements."""
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        if self.terms is None:
            return True
        fields = {"metadata.name": node_name}
        return any(
            all(r.matches(labels) for r in by_label) and all(r.matches(fields) for r in by_field)
            for by_label, by_field in self.terms
        )


def required_node_affinity(pod: Mapping[str, Any]) -> NodeAffinity:
    """The pod's nodeSelector and required node affinity, parsed the way kube-scheduler does.

    A term with a malformed requirement is dropped (it can never match) rather than rejected:
    component-helpers ignores such parse errors "for backwards compatibility".
    """
    spec = pod.get("spec") or {}
    selector = tuple(sorted((str(k), _label_value(v, "spec.nodeSelector")) for k, v in
                            _mapping(spec.get("nodeSelector"), "spec.nodeSelector").items()))
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return NodeAffinity(selector)
    terms = []
    for term in _sequence((required or {}).get("nodeSelectorTerms"), "nodeSelectorTerms"):
        parsed = _parse_node_selector_term(term)
        if parsed is not None:
            terms.append(parsed)
    return NodeAffinity(selector, tuple(terms))


def volume_node_affinity(node_affinity: Mapping[str, Any] | None) -> NodeAffinity:
    """A PersistentVolume's ``spec.nodeAffinity``, read with the same rules as a pod's required node affinity."""
    required = (node_affinity or {}).get("required") if isinstance(node_affinity, Mapping) else None
    if not required:
        return NodeAffinity()
    return required_node_affinity(
        {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}})


def _parse_node_selector_term(term: Any) -> tuple[tuple[Requirement, ...], tuple[Requirement, ...]] | None:
    if not isinstance(term, Mapping):
        return None
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return None  # an empty term selects no node
    by_label: list[Requirement] = []
    by_field: list[Requirement] = []
    for expression in expressions:
        requirement = _parse_requirement(expression, "matchExpressions", _SELECTOR_OPERATORS | {"Gt", "Lt"})
        if isinstance(requirement, str):
            return None
        by_label.append(requirement)
    for expression in fields:
        requirement = _parse_requirement(expression, "matchFields", frozenset({"In", "NotIn"}))
        if isinstance(requirement, str) or requirement.key != "metadata.name" or len(requirement.values) != 1:
            return None
        by_field.append(requirement)
    return tuple(by_label), tuple(by_field)


def has_untolerated_taint(node: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the node has a NoSchedule/NoExecute taint that none of ``tolerations`` tolerates."""
    taints = (node.get("spec") or {}).get("taints") or []
    tolerations = list(tolerations)
    return any(
        taint.get("effect") in _NO_SCHEDULE_EFFECTS and not any(_tolerates(t, taint) for t in tolerations)
        for taint in taints
    )


def pod_tolerations(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod's ``spec.tolerations`` (empty when absent)."""
    return list((pod.get("spec") or {}).get("tolerations") or [])


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    # core/v1 Toleration.ToleratesTaint, including its leniency: an empty key skips the key test
    # whatever the operator.
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def _parse_requirement(expression: Any, where: str, operators: frozenset[str]) -> Requirement | str:
    """A Requirement, or a message saying what is wrong with ``expression``."""
    if not isinstance(expression, Mapping):
        return f"{where}: each expression must be a mapping, got {expression!r}"
    key, operator = expression.get("key"), expression.get("operator")
    raw_values = expression.get("values") or []
    if not isinstance(key, str) or not key:
        return f"{where}: key must be a non-empty string, got {key!r}"
    if operator not in operators:
        return f"{where}: operator {operator!r} for key {key!r} is not one of {sorted(operators)}"
    if isinstance(raw_values, str) or not isinstance(raw_values, Iterable):
        return f"{where}: values for key {key!r} must be a list, got {raw_values!r}"
    values = frozenset(str(v) for v in raw_values)
    if operator in ("In", "NotIn") and not values:
        return f"{where}: operator {operator} for key {key!r} needs at least one value"
    if operator in ("Exists", "DoesNotExist") and values:
        return f"{where}: operator {operator} for key {key!r} takes no values, got {sorted(values)}"
    if operator in ("Gt", "Lt") and (len(values) != 1 or _parse_int64(next(iter(values))) is None):
        return f"{where}: operator {operator} for key {key!r} needs exactly one integer value, got {sorted(values)}"
    return Requirement(key, operator, values)


def _parse_int64(text: str | None) -> int | None:
    # strconv.ParseInt(s, 10, 64): optional sign, ASCII digits only.
    if not text:
        return None
    digits = text[1:] if text[0] in "+-" else text
    if not digits or not all("0" <= ch <= "9" for ch in digits):
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > 19:  # past int64 anyway, and int() raises past 4,300 digits
        return None
    value = -int(significant) if text[0] == "-" else int(significant)
    return value if _INT64[0] <= value <= _INT64[1] else None


def _label_value(value: Any, where: str) -> str:
    if value is None or isinstance(value, Mapping | list):
        raise errors.InvalidPlacementSpec(f"{where}: label values must be strings, got {value!r}")
    return str(value)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise errors.InvalidPlacementSpec(f"{where} must be a mapping, got {value!r}")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | Mapping) or not isinstance(value, Iterable):
        raise errors.InvalidPlacementSpec(f"{where} must be a list, got {value!r}")
    return list(value)
