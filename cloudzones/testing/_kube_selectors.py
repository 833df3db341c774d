"""Label and field selectors for the fake API server, parsed the way the apiserver reads them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists) and
``!k`` (does not exist), joined by commas. Field selectors: ``path=v``, ``path==v``, ``path!=v`` over
dotted paths (``metadata.name``, ``spec.nodeName``); a missing field reads as ``""``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

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


def _label_requirement(text: str) -> Matcher:
    match = _SET_REQ.match(text)
    if match:
        key = match["key"]
        values = {value.strip() for value in match["values"].split(",") if value.strip()}
        if not values:
            raise SelectorError(f"the set in requirement {text.strip()!r} is empty")
        if match["op"] == "in":
            return lambda obj: _labels_of(obj).get(key) in values
        # notin also selects objects that lack the key, as the apiserver does.
        return lambda obj: _labels_of(obj).get(key) not in values
    match = _EQ_REQ.match(text)
    if match:
        key, value = match["key"], match["value"]
        if match["op"] == "!=":
            return lambda obj: _labels_of(obj).get(key) != value
        return lambda obj: key in _labels_of(obj) and _labels_of(obj)[key] == value
    match = _EXISTS_REQ.match(text)
    if match:
        key = match["key"]
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


def _field_requirement(text: str) -> Matcher:
    match = re.match(r"^\s*(?P<path>[A-Za-z0-9_.]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^,]*?)\s*$", text)
    if not match:
        raise SelectorError(f"cannot parse field selector requirement {text.strip()!r}")
    path, value = match["path"], match["value"]
    if match["op"] == "!=":
        return lambda obj: field_value(obj, path) != value
    return lambda obj: field_value(obj, path) == value


def field_matcher(selector: str | None) -> Matcher:
    """A matcher for a field selector string; ``None`` or ``""`` selects everything."""
    if not selector or not selector.strip():
        return lambda obj: True
    requirements = [_field_requirement(part) for part in selector.split(",")]
    return lambda obj: all(requirement(obj) for requirement in requirements)
