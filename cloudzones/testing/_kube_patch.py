"""The three patch formats the apiserver accepts: JSON merge patch, strategic merge patch, JSON patch.

Strategic merge is a documented subset: maps merge and ``null`` deletes, as in a merge patch; the
lists that Kubernetes merges by key for the objects we serve (containers by ``name``,
``conditions`` by ``type``, ...) merge by that key; ``finalizers`` merge as a set; every other list
(node ``taints`` among them: the API marks it atomic) is replaced whole. Merged lists come out in
the apiserver's order: the patch's elements in the patch's (or ``$setElementOrder``'s) order, with
the elements only the server had slotted back where they stood relative to them. The
``$patch: replace|delete``, ``$setElementOrder/<field>`` and ``$deleteFromPrimitiveList/<field>``
directives are honoured, ``$retainKeys`` is ignored; directives left inside replaced lists are
dropped, as the apiserver's decoding drops them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cloudzones.testing._json_tree import copy_tree


class PatchError(ValueError):
    """A patch cannot be applied; the message says which operation or path failed."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` removes a key, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy_tree(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# Field name -> patchMergeKey, from the Kubernetes API types of the objects we serve.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
_MERGE_AS_SET = frozenset({"finalizers"})
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _strip_directives(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_directives(v) for k, v in value.items() if not str(k).startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return copy_tree(value)


def _merge_sorted(left: list[Any], right: list[Any], server_order: list[Any], ident: Any) -> list[Any]:
    """apimachinery's mergeSortedSlice: slot the server-only ``left`` into the patch's ``right``, both kept in order.

    A left element goes before the next right one only when the live list had it in front of it.
    """
    def position(item: Any) -> int:
        wanted = ident(item)
        return next((i for i, old in enumerate(server_order) if ident(old) == wanted), -1)

    merged: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right) or (i < len(left) and 0 <= position(left[i]) < position(right[j])):
            merged.append(left[i])
            i += 1
        else:
            merged.append(right[j])
            j += 1
    return merged


def _in_order(items: list[Any], order: list[Any] | None, ident: Any) -> list[Any]:
    if not order:
        return items
    wanted = [ident(item) for item in order]
    return sorted(items, key=lambda item: wanted.index(ident(item)) if ident(item) in wanted else len(wanted))


def _merge_keyed_list(current: list[Any], patch: list[Any], key: str, order: list[Any] | None) -> list[Any]:
    def ident(item: Any) -> Any:
        return item.get(key) if isinstance(item, Mapping) else item

    patched: list[Any] = []
    touched = set()
    for item in patch:
        if not isinstance(item, Mapping) or key not in item:
            raise PatchError(f"list element {item!r} lacks its merge key {key!r}")
        touched.add(json_key(item[key]))
        if item.get("$patch") == "delete":
            continue
        old = next((o for o in current if isinstance(o, Mapping) and o.get(key) == item[key]), None)
        patched.append(strategic_merge_patch(old or {}, item))
    server_only = [copy_tree(o) for o in current if json_key(ident(o)) not in touched]
    return _merge_sorted(server_only, _in_order(patched, order, ident), current, ident)


def _merge_set(current: list[Any], patch: list[Any], order: list[Any] | None) -> list[Any]:
    patched = [item for index, item in enumerate(patch) if item not in patch[:index]]
    server_only = [item for item in current if item not in patched]
    return _merge_sorted(server_only, _in_order(patched, order, lambda item: item), current, lambda item: item)


def json_key(value: Any) -> str:
    """A hashable stand-in for a merge key's value (keys are usually strings, sometimes numbers)."""
    return repr(value)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch (the subset described in the module docstring)."""
    if not isinstance(patch, Mapping):
        return _strip_directives(patch)
    if patch.get("$patch") == "replace":
        return {k: _strip_directives(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result: dict[str, Any] = copy_tree(dict(target)) if isinstance(target, Mapping) else {}
    orders = {key.removeprefix("$setElementOrder/"): value for key, value in patch.items()
              if key.startswith("$setElementOrder/") and isinstance(value, list)}
    for key, value in patch.items():
        if key.startswith(("$retainKeys", "$setElementOrder/", "$patch")):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE):]
            doomed = set(value) if isinstance(value, list) else set()
            if isinstance(result.get(field), list):
                result[field] = [item for item in result[field] if item not in doomed]
            continue
        found = result.get(key)
        current: list[Any] = found if isinstance(found, list) else []
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in _MERGE_KEYS:
            result[key] = _merge_keyed_list(current, value, _MERGE_KEYS[key], orders.get(key))
        elif isinstance(value, list) and key in _MERGE_AS_SET:
            result[key] = _merge_set(current, value, orders.get(key))
        elif isinstance(value, Mapping):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = _strip_directives(value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if for_add and token == "-":  # noqa: S105 - the JSON pointer "append" token
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"{token!r} is not a list index")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise PatchError(f"list index {index} is out of range (length {len(container)})")
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, for_add=False)]
        else:
            raise PatchError(f"path {path!r} does not exist")
    return node


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise PatchError(f"path {path!r} does not exist")


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, for_add=False))
    raise PatchError(f"path {path!r} does not exist")


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"path {path!r} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, for_add=False)] = value
        else:
            parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise PatchError(f"path {path!r} does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations (add, remove, replace, move, copy, test) applied to a copy of ``target``."""
    if not isinstance(operations, list):
        raise PatchError(f"a JSON patch must be a list of operations, got {type(operations).__name__}")
    doc = copy_tree(target)
    for operation in operations:
        if not isinstance(operation, Mapping) or "op" not in operation or "path" not in operation:
            raise PatchError(f"malformed JSON patch operation {operation!r}")
        op, path = operation["op"], operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"JSON patch operation {op!r} at {path!r} needs a value")
        if op == "add":
            doc = _add(doc, path, copy_tree(operation["value"]))
        elif op == "replace":
            doc = _add(doc, path, copy_tree(operation["value"]), replace=True)
        elif op == "remove":
            _remove(doc, path)
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise PatchError(f"JSON patch operation {op!r} at {path!r} needs 'from'")
            if op == "move" and source == path:
                _get(doc, source)  # moving a value onto itself changes nothing, if it exists
                continue
            if op == "move" and path.startswith(source + "/"):
                raise PatchError(f"cannot move {source!r} into its own child {path!r}")
            value = _remove(doc, source) if op == "move" else copy_tree(_get(doc, source))
            doc = _add(doc, path, value)
        elif op == "test":
            if _get(doc, path) != operation["value"]:
                raise PatchError(f"test failed: {path!r} is not {operation['value']!r}")
        else:
            raise PatchError(f"unknown JSON patch operation {op!r}")
    return doc
