"""Label and field selectors for the fake API server, parsed the way the apiserver reads them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists) and
``!k`` (does not exist), joined by commas. Field selectors: ``path=v``, ``path==v``, ``path!=v`` over
dotted paths (``metadata.name``, ``spec.nodeName``); a missing field reads as ``""`` (booleans the
apiserver formats read ``"false"``). Given the resource, only the field labels the apiserver supports
for it are accepted, and refused in its words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones.testing import _kube_status as status
from cloudzones.testing import _kube_validation as validation

Matcher = Callable[[Mapping[str, Any]], bool]
"""Decides whether an object (a manifest dict) is selected."""

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_REQ = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_EQ_REQ = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|!=|=)\s*(?P<value>{_VALUE})\s*$")
_EXISTS_REQ = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")


class SelectorError(ValueError):
    """A selector string cannot be parsed; the message quotes the offending part."""


def _split_requirements(selector: str) -> list[str]:
    """Split on commas that are not inside an ``in (...)`` value list."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in selector {selector!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise SelectorError(f"unbalanced '(' in selector {selector!r}")
    parts.append("".join(current))
    return parts


def _labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def _checked(key: str, values: set[str] | list[str]) -> None:
    """Keys and values beyond the label rules (length, prefix) are refused, as the apiserver's parser does."""
    problems = validation.qualified_name_errors(key, "a valid label key")
    problems += [f"values[{index}][{key}]: Invalid value: \"{value}\": {problem}"
                 for index, value in enumerate(sorted(values)) for problem in validation.label_value_errors(value)]
    if problems:
        raise SelectorError(f"unable to parse requirement: {problems[0]}")


def _label_requirement(text: str) -> Matcher:
    match = _SET_REQ.match(text)
    if match:
        key = match["key"]
        values = {value.strip() for value in match["values"].split(",") if value.strip()}
        if not values:
            raise SelectorError(f"the set in requirement {text.strip()!r} is empty")
        _checked(key, values)
        if match["op"] == "in":
            return lambda obj: _labels_of(obj).get(key) in values
        # notin also selects objects that lack the key, as the apiserver does.
        return lambda obj: _labels_of(obj).get(key) not in values
    match = _EQ_REQ.match(text)
    if match:
        key, value = match["key"], match["value"]
        _checked(key, [value])
        if match["op"] == "!=":
            return lambda obj: _labels_of(obj).get(key) != value
        return lambda obj: key in _labels_of(obj) and _labels_of(obj)[key] == value
    match = _EXISTS_REQ.match(text)
    if match:
        key = match["key"]
        _checked(key, [])
        if match["neg"]:
            return lambda obj: key not in _labels_of(obj)
        return lambda obj: key in _labels_of(obj)
    raise SelectorError(f"cannot parse label selector requirement {text.strip()!r}")


def label_matcher(selector: str | None) -> Matcher:
    """A matcher for a label selector string; ``None`` or ``""`` selects everything."""
    if not selector or not selector.strip():
        return lambda obj: True
    requirements = [_label_requirement(part) for part in _split_requirements(selector)]
    return lambda obj: all(requirement(obj) for requirement in requirements)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value at a dotted path, ``""`` when any step is missing."""
    current: Any = obj
    for step in path.split("."):
        if not isinstance(current, Mapping) or step not in current:
            return ""
        current = current[step]
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


# Field labels that are not the dotted path of the value, or whose absent value the apiserver formats.
_FIELD_PATHS = {"source": "source.component"}
_FIELD_DEFAULTS = {"spec.unschedulable": "false", "spec.hostNetwork": "false"}


def _field_requirement(text: str, rtype: status.ResourceType | None) -> Matcher:
    match = re.match(r"^\s*(?P<path>[A-Za-z0-9_.]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^,]*?)\s*$", text)
    if not match:
        raise SelectorError(f"invalid selector: {text.strip()!r}; can't understand {text.strip()!r}")
    label, value = match["path"], match["value"]
    if rtype is not None and label not in rtype.field_labels:
        if rtype.known_fields_message:
            raise SelectorError(f'"{label}" is not a known field selector: only '
                                + ", ".join(f'"{known}"' for known in rtype.field_labels))
        raise SelectorError(f"field label not supported: {label}")
    path, default = _FIELD_PATHS.get(label, label), _FIELD_DEFAULTS.get(label, "")

    def read(obj: Mapping[str, Any]) -> str:
        return field_value(obj, path) or default

    if match["op"] == "!=":
        return lambda obj: read(obj) != value
    return lambda obj: read(obj) == value


def field_matcher(selector: str | None, rtype: status.ResourceType | None = None) -> Matcher:
    """A matcher for a field selector string (``rtype``: only its field labels); ``None`` or ``""`` selects all."""
    if not selector or not selector.strip():
        return lambda obj: True
    requirements = [_field_requirement(part, rtype) for part in selector.split(",")]
    return lambda obj: all(requirement(obj) for requirement in requirements)
