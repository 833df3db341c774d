"""Review an ``admission.k8s.io/v1`` AdmissionReview for a PersistentVolume: add zone labels and node affinity.

Pure: the disk lookup is injected as ``labels_for_volume``. A well-formed review always gets a
well-formed answer; only a body that is not an AdmissionReview at all raises `MalformedReview`
(the server turns that into HTTP 400).
"""

from __future__ import annotations

import binascii
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

import orjson

from cloudzones import errors, labels

log = logging.getLogger(__name__)

VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
LabelsForVolume = Callable[[Mapping[str, Any]], Mapping[str, str]]


class MalformedReview(errors.CloudZonesError, ValueError):
    """The request body is not an AdmissionReview we can answer."""


_PLAIN = frozenset({str, list, int, float, bool})


def _is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    # Reviews arrive as parsed JSON (dicts): skip the ABC machinery of isinstance(x, Mapping) for them.
    kind = type(value)
    if kind is dict:
        return True
    if value is None or kind in _PLAIN:
        return False
    return isinstance(value, Mapping)


def _escape(key: str) -> str:
    # RFC 6901: "~" first, then "/".
    return key.replace("~", "~0").replace("/", "~1")


def parse(body: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    """Decode and check the envelope; `MalformedReview` says what is wrong."""
    if isinstance(body, (bytes, str)):
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            if "depth" in str(exc) or "recursion" in str(exc):
                raise MalformedReview("body is nested too deeply to be an AdmissionReview") from None
            raise MalformedReview(f"body is not JSON: {str(exc)[:200]}") from exc
    else:
        data = body
    if not _is_map(data):
        raise MalformedReview(f"an AdmissionReview must be a JSON object, got {type(data).__name__}")
    if data.get("kind") != "AdmissionReview" or data.get("apiVersion") not in VERSIONS:
        raise MalformedReview(f"expected kind AdmissionReview in {list(VERSIONS)}, got kind {data.get('kind')!r}"
                              f" apiVersion {data.get('apiVersion')!r}")
    request = data.get("request")
    if not _is_map(request) or type(uid := request.get("uid")) is not str or not uid:
        raise MalformedReview("the AdmissionReview has no request.uid")
    # Freshly decoded JSON is ours already: copy only a caller's mapping.
    return data if type(data) is dict else dict(data)


def _encode(patch: list[dict[str, Any]]) -> str:
    return binascii.b2a_base64(orjson.dumps(patch), newline=False).decode("ascii")


@functools.lru_cache(maxsize=256)
def _plain_patch(new_labels: tuple[tuple[str, str], ...]) -> str:
    # A memo, not state: the encoded patch of a PV with neither labels nor node affinity depends only on
    # the labels, and every such PV in one zone gets the same one. Building and encoding it was a third
    # of a review's CPU. Bounded, as the labels come from the cloud.
    return _encode(patch_for(_PLAIN_PV, dict(new_labels)))


_PLAIN_PV: Mapping[str, Any] = {"metadata": {}, "spec": {}}
"""What `patch_for` sees of a PV whose metadata has no labels and whose spec has no node affinity."""


def _rememberable(new_labels: Mapping[str, str]) -> bool:
    # Labels the API server could accept (a few, keys <= 317 and values <= 63 characters): a hostile or
    # broken cloud answer with megabyte-long values is answered, but not kept 256 times over.
    return len(new_labels) <= 8 and all(type(k) is str and type(v) is str and len(k) <= 317 and len(v) <= 63
                                        for k, v in new_labels.items())


def _encoded_patch(pv: Mapping[str, Any], new_labels: Mapping[str, str]) -> str:
    """`patch_for`, base64-encoded as a review answer carries it."""
    metadata, spec = pv.get("metadata"), pv.get("spec")
    if (_is_map(metadata) and not _is_map(metadata.get("labels"))
            and _is_map(spec) and not _is_map(spec.get("nodeAffinity")) and _rememberable(new_labels)):
        return _plain_patch(tuple(new_labels.items()))
    return _encode(patch_for(pv, new_labels))


def _answer(review: Mapping[str, Any], *, allowed: bool = True, patch: str = "",
            warnings: list[str] | None = None, message: str | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": allowed}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = patch
    if warnings:
        response["warnings"] = [w[:120] for w in warnings]
    if message is not None:
        response["status"] = {"code": 403 if not allowed else 200, "message": message}
    return {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}


def _has_topology(existing: object) -> bool:
    # Plain lookups, no generators: this runs once per review, between TLS reads and writes that leave
    # the caches cold, where every extra frame costs several times what it does in a loop.
    if not existing or not _is_map(existing):
        return False
    get = existing.get
    return bool((get(labels.ZONE) or get(labels.BETA_ZONE)) and (get(labels.REGION) or get(labels.BETA_REGION)))


def patch_for(pv: Mapping[str, Any], new_labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """JSON Patch adding ``new_labels`` and matching required node-affinity terms to ``pv``."""
    metadata = pv.get("metadata")
    current = metadata.get("labels") if _is_map(metadata) else None
    ops: list[dict[str, Any]] = []
    # "add" needs the parent to exist: create whatever level is missing, with its content.
    if not _is_map(metadata):
        ops.append({"op": "add", "path": "/metadata", "value": {"labels": dict(new_labels)}})
    elif not _is_map(current):
        ops.append({"op": "add", "path": "/metadata/labels", "value": dict(new_labels)})
    else:
        ops += [{"op": "add", "path": f"/metadata/labels/{_escape(k)}", "value": v} for k, v in new_labels.items()
                if current.get(k) != v]
    # Affinity on the GA keys only: every node labeller writes them; beta ones may be switched off.
    requirements = []
    if zone := new_labels.get(labels.ZONE):
        requirements.append({"key": labels.ZONE, "operator": "In", "values": [zone]})
    if region := new_labels.get(labels.REGION):
        requirements.append({"key": labels.REGION, "operator": "In", "values": [region]})
    if not requirements:
        return ops
    spec = pv.get("spec")
    if not _is_map(spec):
        affinity_value = {"required": {"nodeSelectorTerms": [{"matchExpressions": requirements}]}}
        ops.append({"op": "add", "path": "/spec", "value": {"nodeAffinity": affinity_value}})
        return ops
    affinity = spec.get("nodeAffinity")
    required = affinity.get("required") if _is_map(affinity) else None
    terms = required.get("nodeSelectorTerms") if _is_map(required) else None
    if not isinstance(terms, list) or not terms:
        value = {"required": {"nodeSelectorTerms": [{"matchExpressions": requirements}]}}
        if _is_map(affinity):
            ops.append({"op": "add", "path": "/spec/nodeAffinity/required", "value": value["required"]})
        else:
            ops.append({"op": "add", "path": "/spec/nodeAffinity", "value": value})
        return ops
    # Terms are OR-ed: each must also require the disk's zone, or one term could place the pod elsewhere.
    for index, term in enumerate(terms):
        expressions = term.get("matchExpressions") if _is_map(term) else None
        have = {e.get("key") for e in expressions or [] if _is_map(e)}
        missing = [r for r in requirements if r["key"] not in have]
        if not missing:
            continue
        if isinstance(expressions, list):
            ops += [{"op": "add", "path": f"/spec/nodeAffinity/required/nodeSelectorTerms/{index}/matchExpressions/-",
                     "value": r} for r in missing]
        else:
            ops.append({"op": "add", "path": f"/spec/nodeAffinity/required/nodeSelectorTerms/{index}/matchExpressions",
                        "value": missing})
    return ops


def review(body: bytes | str | Mapping[str, Any], *, labels_for_volume: LabelsForVolume,
           fail_closed: bool = False) -> dict[str, Any]:
    """The AdmissionReview response for ``body``; raises only `MalformedReview`."""
    data = parse(body)
    request = data["request"]
    kind = (request.get("kind") or {}).get("kind") if _is_map(request.get("kind")) else None
    pv = request.get("object")
    if request.get("operation") != "CREATE" or kind != "PersistentVolume" or not _is_map(pv):
        return _answer(data)
    raw_metadata = pv.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if _is_map(raw_metadata) else {}
    name = metadata.get("name", "?")
    if _has_topology(metadata.get("labels") or {}):
        return _answer(data)  # dynamically provisioned PVs that already say where they are are trusted
    try:
        found = dict(labels_for_volume(pv))
    except Exception as exc:  # the webhook must answer whatever the cloud did
        log.warning("cannot label PersistentVolume %s: %s", name, exc)
        text = f"cloudzones could not read the disk of PersistentVolume {name}: {exc}"
        if fail_closed:
            return _answer(data, allowed=False, message=text)
        return _answer(data, warnings=[text])
    if not found:
        return _answer(data)
    return _answer(data, patch=_encoded_patch(pv, found))
