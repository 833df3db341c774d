"""The one reader of YAML/JSON input files (StorageClasses, claims, nodes, plans, snapshots, cloud configs, IMDS
documents, scenarios): bounded, safe, and one clear line when a file is wrong.

Every command and service reads its files through `load_all` / `load_one` / `manifests`, so each hostile
input is handled once, here:

- what is not a regular file (a directory, a FIFO, ``/dev/zero``) is refused before any read, and at most
  ``limit`` bytes are read (64 MiB by default; ``CLOUDZONES_MAX_INPUT_MIB`` raises it);
- bytes that are not UTF-8 are named with their offset;
- YAML goes through libyaml's C parser when present (a 50 MB file: 14 s instead of 124 s), safe
  construction only (``!!python`` tags are refused), and no aliases: an alias can make a small file expand
  to billions of nodes for whoever walks the result (the "billion laughs");
- nesting deeper than `MAX_DEPTH` and integers longer than Python's digit limit are refused with their place.

Errors are `InputError` (a `ConfigError`): ``<file>: <what is wrong> (line L, column C)``.
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Mapping
from typing import Any

import orjson
import yaml

from cloudzones import errors, shapes
from cloudzones.shapes import describe, describe_kind

MAX_DEPTH = 64
"""Deepest nesting accepted: Kubernetes manifests stay under 20 levels; deeper input is an attack or a mistake."""
DEFAULT_LIMIT_MIB = 64

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(errors.ConfigError):
    """An input file is unreadable, too large, not UTF-8, not YAML/JSON, or holds what was not expected."""


def limit_bytes() -> int:
    """The most bytes a file may have: ``CLOUDZONES_MAX_INPUT_MIB`` MiB, else 64 MiB."""
    raw = os.environ.get("CLOUDZONES_MAX_INPUT_MIB", "")
    if not raw:
        return DEFAULT_LIMIT_MIB * 1024 * 1024
    try:
        mib = int(raw)
    except ValueError:
        mib = 0
    if mib <= 0:
        raise InputError(f"CLOUDZONES_MAX_INPUT_MIB must be a positive whole number of MiB, got {raw!r}")
    return mib * 1024 * 1024


def read_text(path: str | os.PathLike[str], *, what: str = "file", limit: int | None = None) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes."""
    name = os.fspath(path)
    if not name:
        raise InputError(f"{what}: an empty path was given")
    limit = limit_bytes() if limit is None else limit
    try:
        with open(name, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not stat.S_ISREG(mode):
                kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
                raise InputError(f"{what} {name}: {kind}")
            data = handle.read(limit + 1)
    except IsADirectoryError:
        raise InputError(f"{what} {name}: a directory") from None
    except OSError as exc:
        raise InputError(f"{what} {name}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{what} {name}: larger than {limit // (1024 * 1024)} MiB "
                         "(set CLOUDZONES_MAX_INPUT_MIB to allow more)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {name}: not UTF-8 text "
                         f"(byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def parse(text: str, *, source: str) -> list[Any]:
    """The documents of a YAML (or JSON) text, ``None`` documents dropped."""
    # Parsing builds millions of objects and no cycles; the cyclic collector would scan the growing
    # heap again and again (a 70 MB snapshot: 2.4 s of orjson with it, 0.7 s without).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse(text, source)
    finally:
        if enabled:
            gc.enable()


def _parse(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            # orjson: a 70 MB snapshot in well under a second (json: 3 s on a slow core); it refuses
            # NaN, integers over 64 bits and nesting over 1,024, which then go to the YAML parser below.
            document = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # YAML flow style also starts with { or [: let the YAML parser say what is wrong
        else:
            _check_depth(document, source)
            return [] if document is None else [document]
    return _parse_yaml(text, source)


def _parse_yaml(text: str, source: str) -> list[Any]:
    loader = _Loader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            _check_node(node, source)
            document = loader.construct_document(node)
            if document is not None:
                documents.append(document)
    except InputError:
        raise
    except yaml.MarkedYAMLError as exc:
        raise InputError(f"{source}: not valid YAML or JSON: {exc.problem or exc.context}{_place(exc.problem_mark)}") \
            from None
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML or JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{source}: nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise InputError(f"{source}: {_plain(exc)}") from None
    finally:
        loader.dispose()
    return documents


def _check_node(root: yaml.Node, source: str) -> None:
    """Refuse aliases (a node reached twice) and nesting deeper than MAX_DEPTH, without recursion."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            raise InputError(f"{source}: YAML aliases (*name) are not accepted: the anchored node"
                             f"{_place(node.start_mark)} is used twice")
        seen.add(id(node))
        if depth > MAX_DEPTH:
            raise InputError(f"{source}: nested more than {MAX_DEPTH} levels deep{_place(node.start_mark)}")
        # Children pushed in reverse so that nodes are visited in document order.
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.extend(((value, depth + 1), (key, depth + 1)))


def _check_depth(document: Any, source: str) -> None:
    # Level by level over containers only (a 150,000-pod snapshot has millions of scalars); a value at
    # level MAX_DEPTH + 1 exists exactly when a container at level MAX_DEPTH is not empty.
    level = [document] if isinstance(document, (dict, list)) else []
    for depth in range(1, MAX_DEPTH + 1):
        if not level:
            return
        if depth == MAX_DEPTH:
            if any(level):
                raise InputError(f"{source}: nested more than {MAX_DEPTH} levels deep")
            return
        deeper: list[Any] = []
        for value in level:
            children = value.values() if type(value) is dict else value
            deeper.extend(child for child in children if type(child) is dict or type(child) is list)
        level = deeper


def _place(mark: Any) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _plain(exc: ValueError) -> str:
    text = str(exc)
    if "digits" in text and "int" in text:
        return "a number has more digits than allowed (4,300)"
    return text.splitlines()[0] if text else type(exc).__name__


def load_all(path: str | os.PathLike[str], *, what: str = "file") -> list[Any]:
    """Every non-empty document of a YAML/JSON file."""
    return parse(read_text(path, what=what), source=f"{what} {os.fspath(path)}")


def load_one(path: str | os.PathLike[str], *, what: str = "file") -> Any:
    """The single document of a YAML/JSON file (none or several: `InputError`)."""
    documents = load_all(path, what=what)
    if len(documents) != 1:
        raise InputError(f"{what} {os.fspath(path)}: expected one document, found {len(documents)}")
    return documents[0]


def manifests(path: str | os.PathLike[str], *, what: str = "file", kind: str | None = None) -> list[dict[str, Any]]:
    """The Kubernetes manifests of a file: ``---``-separated documents, YAML lists and ``List`` items flattened.

    Each must be a mapping; with ``kind`` each must be of that kind (or say no kind at all).
    """
    source = f"{what} {os.fspath(path)}"
    found: list[dict[str, Any]] = []
    for index, document in enumerate(load_all(path, what=what)):
        if isinstance(document, Mapping) and "items" in document and str(document.get("kind", "List")).endswith("List"):
            items, where = document.get("items"), f"document {index + 1}.items"
            if items is None:
                continue
            if not isinstance(items, list):
                raise InputError(f"{source}: {where}: expected a list, got {describe(items)}")
        elif isinstance(document, list):
            items, where = document, f"document {index + 1}"
        else:
            items, where = [document], f"document {index + 1}"
        for position, item in enumerate(items):
            place = f"{where}[{position}]" if where.endswith("items") or isinstance(document, list) else where
            if not isinstance(item, dict):
                raise InputError(f"{source}: {place}: expected a manifest (a mapping), got {describe(item)}")
            if kind is not None and item.get("kind", kind) != kind:
                raise InputError(f"{source}: {place}: expected a {kind}, got a {describe_kind(item)}")
            try:
                shapes.check_manifest(item if kind is None or "kind" in item else {**item, "kind": kind})
            except shapes.ShapeError as exc:
                raise InputError(f"{source}: {place}: {exc}") from None
            found.append(item)
    return found
