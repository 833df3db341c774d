"""Validation of the fake API server: the checks of the apiserver that our code can trip over, worded like it.

Checked on every create, update and patch (the object as it would be stored): ``metadata.name`` and
``metadata.generateName`` (RFC 1123 subdomains, at most 253 characters; Events take any name), label
keys and values, annotation keys and their total size, and node taints (a key and one of the three
effects). A refusal is 422 ``Invalid`` with ``details.causes``, one per field, as the apiserver sends.
Everything else about an object's fields is accepted as it comes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from cloudzones.testing import _kube_status as status

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN_MESSAGE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                      "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                      f"for validation is '{_SUBDOMAIN}')")
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_MESSAGE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                 "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                 f"is '{_NAME}')")
_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_VALUE_MESSAGE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                  f"'12345', regex used for validation is '{_VALUE}')")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_ANNOTATIONS_LIMIT = 256 * 1024

_Causes = list[tuple[str, str]]


def _quote(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def _invalid(causes: _Causes, field: str, value: Any, detail: str) -> None:
    causes.append((field, f"Invalid value: {_quote(value)}: {detail}"))


def subdomain_errors(value: str) -> list[str]:
    """Why ``value`` is not an RFC 1123 subdomain (empty when it is one)."""
    found = []
    if len(value) > 253:
        found.append("must be no more than 253 characters")
    if not re.fullmatch(_SUBDOMAIN, value):
        found.append(_SUBDOMAIN_MESSAGE)
    return found


def qualified_name_errors(key: str, what: str = "a qualified name") -> list[str]:
    """Why ``key`` is not a qualified name (``[prefix/]name``), as label and annotation keys must be."""
    parts = key.split("/")
    if len(parts) > 2:
        return [f"{what} {_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    found = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            found.append("prefix part must be non-empty")
        else:
            found.extend(f"prefix part {message}" for message in subdomain_errors(prefix))
    name = parts[-1]
    if not name:
        found.append("name part must be non-empty")
    elif len(name) > 63:
        found.append("name part must be no more than 63 bytes")
    if not re.fullmatch(_NAME, name):
        found.append(f"name part {_NAME_MESSAGE}")
    return found


def label_value_errors(value: Any) -> list[str]:
    """Why ``value`` is not a label value."""
    if not isinstance(value, str):
        return ["a label value must be a string"]
    found = []
    if len(value) > 63:
        found.append("must be no more than 63 bytes")
    if not re.fullmatch(_VALUE, value):
        found.append(_VALUE_MESSAGE)
    return found


def _metadata_causes(rtype: status.ResourceType, meta: Mapping[str, Any], causes: _Causes) -> None:
    name = meta.get("name")
    if rtype.plural != "events" and isinstance(name, str):
        generate = meta.get("generateName")
        if isinstance(generate, str) and generate and name.startswith(generate):
            # The prefix may end in '-' or '.': the apiserver checks it as if it ended in a letter.
            masked = generate[:-1] + "a" if generate[-1] in "-." else generate
            for detail in subdomain_errors(masked):
                _invalid(causes, "metadata.generateName", generate, detail)
        for detail in subdomain_errors(name):
            _invalid(causes, "metadata.name", name, detail)
    labels = meta.get("labels") or {}
    for key, value in labels.items() if isinstance(labels, Mapping) else ():
        for detail in qualified_name_errors(key, "a valid label key"):
            _invalid(causes, "metadata.labels", key, detail)
        for detail in label_value_errors(value):
            _invalid(causes, "metadata.labels", value, detail)
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, Mapping):
        for key in annotations:
            for detail in qualified_name_errors(key):
                _invalid(causes, "metadata.annotations", key, detail)
        size = sum(len(key) + len(str(value)) for key, value in annotations.items())
        if size > _ANNOTATIONS_LIMIT:
            causes.append(("metadata.annotations", f"Too long: may not be more than {_ANNOTATIONS_LIMIT} bytes"))


def _taint_causes(obj: Mapping[str, Any], causes: _Causes) -> None:
    taints = (obj.get("spec") or {}).get("taints") or []
    for index, taint in enumerate(taints if isinstance(taints, list) else []):
        # The apiserver names these fields "metadata.taints[i]..." (sic); we say what it says.
        field = f"metadata.taints[{index}]"
        if not isinstance(taint, Mapping):
            causes.append((field, f"Invalid value: {_quote(taint)}: a taint must be an object"))
            continue
        key = str(taint.get("key") or "")
        for detail in qualified_name_errors(key):
            _invalid(causes, f"{field}.key", key, detail)
        effect = taint.get("effect")
        if not effect:
            causes.append((f"{field}.effect", "Required value"))
        elif effect not in _EFFECTS:
            causes.append((f"{field}.effect", f"Unsupported value: {_quote(effect)}: supported values: "
                                              + ", ".join(f'"{e}"' for e in _EFFECTS)))


def check(rtype: status.ResourceType, obj: Mapping[str, Any]) -> None:
    """Raise 422 ``Invalid`` (every cause at once) when ``obj`` breaks a rule this module checks."""
    causes: _Causes = []
    meta = obj.get("metadata")
    _metadata_causes(rtype, meta if isinstance(meta, Mapping) else {}, causes)
    if rtype.plural == "nodes":
        _taint_causes(obj, causes)
    if causes:
        raise invalid(rtype, str((meta or {}).get("name") or ""), causes)


def _reason(detail: str) -> str:
    for prefix, reason in (("Required value", "FieldValueRequired"), ("Unsupported value", "FieldValueNotSupported"),
                           ("Too long", "FieldValueTooLong")):
        if detail.startswith(prefix):
            return reason
    return "FieldValueInvalid"


def invalid(rtype: status.ResourceType, name: str, causes: _Causes) -> status.ApiStatusError:
    """The apiserver's 422: ``Kind "name" is invalid: field: detail`` (several in ``[...]``) with causes."""
    texts = [f"{field}: {detail}" for field, detail in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    kind = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    details: dict[str, Any] = {"name": name, "kind": rtype.kind,
                               "causes": [{"reason": _reason(detail), "message": detail, "field": field}
                                          for field, detail in causes]}
    if rtype.group:
        details["group"] = rtype.group
    return status.ApiStatusError(422, f'{kind} "{name}" is invalid: {joined}', details=details)
