"""What the pod zone annotator should write on a pod, decided from the pod and its node's labels (pure).

The zone-injection pattern of the Loki operator and ECK: a pod cannot learn its node's labels
through the downward API, so a controller copies them into pod annotations, which the downward
API can expose. One annotation per topology key (named like the label) and one combined value,
the label values joined with ``_`` in key order (the Loki operator's convention for several
keys). Nothing is written until every key has a non-empty value on the node, so a consumer
never sees a partial set; an annotation already present is never changed.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cloudzones import errors, labels

DEFAULT_KEYS: tuple[str, ...] = (labels.ZONE, labels.REGION)
"""The node labels copied by default: zone, then region."""

SEPARATOR = "_"
"""Joins the values of several keys in the combined annotation (``eastus-1_eastus``)."""


class Action(str, enum.Enum):
    """What a decision asks for."""

    PATCH = "patch"
    """Add ``Decision.patch`` to the pod's annotations."""
    NOTHING = "nothing"
    """Every annotation is already there (or conflicts, which we leave alone)."""
    SKIP = "skip"
    """The pod is not bound yet, is terminating or has finished: look again when it changes."""
    WAIT_NODE = "wait-node"
    """The node is not known (yet): try again later."""
    WAIT_LABELS = "wait-labels"
    """The node lacks (or has empty) requested labels: report it, try again later."""


@dataclasses.dataclass(frozen=True)
class Decision:
    """The outcome of `decide` for one pod."""

    action: Action
    node: str = ""
    """The node the pod is bound to ("" when unbound)."""
    patch: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Annotations to add (only keys the pod does not have)."""
    missing: tuple[str, ...] = ()
    """Requested label keys that the node lacks or has empty, in key order."""
    conflicts: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """Annotation key → (value on the pod, value we would have written), for annotations left alone."""


def validate_keys(keys: Iterable[str], combined: str) -> tuple[str, ...]:
    """The keys as a tuple, after checking they are distinct, non-empty and not the combined key."""
    result = tuple(keys)
    if not result:
        raise errors.ConfigError("the pod zone annotator needs at least one node label key to copy")
    for key in result:
        if not key or not key.strip() or key != key.strip():
            raise errors.ConfigError(f"node label key {key!r} is empty or has surrounding spaces")
    if len(set(result)) != len(result):
        raise errors.ConfigError(f"node label keys {list(result)!r} name the same key twice")
    if not combined or combined in result:
        raise errors.ConfigError(f"the combined annotation key {combined!r} must be non-empty and differ from "
                                 f"the copied keys {list(result)!r}")
    return result


def combined_value(values: Sequence[str]) -> str:
    """The combined annotation value: the label values joined with ``_`` in key order."""
    return SEPARATOR.join(values)


def bound_node(pod: Mapping[str, Any]) -> str:
    """The node the pod is bound to (``spec.nodeName``), or ""."""
    return str((pod.get("spec") or {}).get("nodeName") or "")


def is_finished(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is terminating or has finished (Succeeded/Failed): nothing to annotate then."""
    metadata = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return bool(metadata.get("deletionTimestamp")) or phase in ("Succeeded", "Failed")


def decide(pod: Mapping[str, Any], node_labels: Mapping[str, str] | None, *,
           keys: Sequence[str] = DEFAULT_KEYS, combined: str = labels.POD_ZONES) -> Decision:
    """What to write on ``pod`` given its node's labels (``None``: the node is not known).

    The per-key annotations are named like the label keys; ``combined`` holds every value joined
    with ``_``. An annotation the pod already has is never rewritten: equal, it needs nothing;
    different, it is reported in ``conflicts`` and left as it is, while the other keys are
    still added.
    """
    node = bound_node(pod)
    if not node or is_finished(pod):
        return Decision(Action.SKIP, node)
    if node_labels is None:
        return Decision(Action.WAIT_NODE, node)
    missing = tuple(key for key in keys if not node_labels.get(key))
    if missing:
        return Decision(Action.WAIT_LABELS, node, missing=missing)
    wanted = {key: str(node_labels[key]) for key in keys}
    wanted[combined] = combined_value([wanted[key] for key in keys])
    present = (pod.get("metadata") or {}).get("annotations") or {}
    patch: dict[str, str] = {}
    conflicts: dict[str, tuple[str, str]] = {}
    for key, value in wanted.items():
        if key not in present:
            patch[key] = value
        elif present[key] != value:
            conflicts[key] = (str(present[key]), value)
    return Decision(Action.PATCH if patch else Action.NOTHING, node, patch=patch, conflicts=conflicts)


def annotation_patch(annotations: Mapping[str, str]) -> dict[str, Any]:
    """The merge patch (RFC 7386) adding ``annotations`` to a pod."""
    return {"metadata": {"annotations": dict(annotations)}}


def project_pod(pod: Mapping[str, Any], annotation_keys: Iterable[str]) -> dict[str, Any]:
    """The part of a pod the annotator needs: identity, node, phase, and only the annotations it writes.

    Keeping only those annotations means an informer using this projection does not wake the
    annotator when unrelated annotations or the pod's status change.
    """
    metadata = pod.get("metadata") or {}
    present = metadata.get("annotations") or {}
    kept = {key: present[key] for key in annotation_keys if key in present}
    projected_meta: dict[str, Any] = {key: metadata[key] for key in ("name", "namespace", "uid") if key in metadata}
    if kept:
        projected_meta["annotations"] = kept
    if metadata.get("deletionTimestamp"):
        projected_meta["deletionTimestamp"] = metadata["deletionTimestamp"]
    result: dict[str, Any] = {"metadata": projected_meta, "spec": {"nodeName": bound_node(pod)}}
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        result["status"] = {"phase": phase}
    return result


def missing_labels_message(node: str, missing: Sequence[str]) -> str:
    """The Event message for a node lacking labels: names the node and every missing key."""
    which = ", ".join(repr(key) for key in missing)
    noun = "label" if len(missing) == 1 else "labels"
    return (f'node "{node}" has no value for the {noun} {which}; the pod\'s zone annotations are '
            "written once it has")
