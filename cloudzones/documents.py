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

JSON that a peer answers with (the API server, ARM, IMDS) is decoded by `peer_json`, also here, so that its
nesting is handled the same way wherever it arrives; `peer_json_reader` reads only the fields a hot caller
needs, typed, from large answers.
"""

from __future__ import annotations

import gc
import json
import os
import stat
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import msgspec
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


class NestedTooDeeply(ValueError):
    """JSON from a peer nested past the interpreter's recursion limit (about 1,000 levels)."""


def peer_json(data: bytes | str) -> Any:
    """JSON an API server, ARM or IMDS answered with: ``json.loads``, nesting past the recursion limit raised as
    `NestedTooDeeply` (a ValueError, like every other reason the answer is not JSON).

    The cyclic collector is off meanwhile: allocation deep inside that recursion would start collections that
    finalize unrelated garbage (an unclosed socket's ResourceWarning) at the recursion limit, where their own
    errors escape as "exception ignored" (a test's unraisable-exception failure, once in CI).
    """
    return _peer_decode(json.loads, data)


def _peer_decode(decode: Callable[[Any], Any], data: Any) -> Any:
    """``decode(data)`` with the collector off, nesting past the recursion limit as `NestedTooDeeply`."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return decode(data)
    except RecursionError:
        raise NestedTooDeeply("JSON nested too deeply to read") from None
    finally:
        if enabled:
            gc.enable()


def peer_json_reader(shape: Any) -> Callable[[bytes], Any]:
    """A reader of JSON a peer answered with that keeps only the fields of ``shape`` (TypedDicts), typed.

    For large answers of which little is read (ARM's scale-set instance pages: 3-10 KB an instance, five
    fields kept): msgspec checks the types as it reads and skips everything else without building it,
    5x less CPU than `peer_json` and a walk over the result. An answer that is not valid UTF-8, nested
    too deeply, or does not fit ``shape`` is a ValueError (`NestedTooDeeply` for nesting) whose words are
    msgspec's; callers that owe their user a better message read it again with `peer_json`.
    """
    decoder = msgspec.json.Decoder(shape)

    def read(data: bytes) -> Any:
        try:
            # Decoded first: msgspec does not check the UTF-8 of strings it skips, and a peer's answer
            # that is not UTF-8 is refused whichever fields are read.
            return _peer_decode(decoder.decode, data.decode("utf-8"))
        except msgspec.MsgspecError as exc:
            raise ValueError(str(exc)) from None

    return read


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
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
                raise InputError(f"{what} {name}: {kind}")
            data = _read(handle, info.st_size, limit)
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


def _read(handle: BinaryIO, size: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``handle``, a file of ``size`` bytes by fstat."""
    # read(n) allocates n bytes before it reads: asking for limit + 1 would cost a 1 KB file 64 MiB, and a
    # limit of terabytes (CLOUDZONES_MAX_INPUT_MIB) a MemoryError. So the size fstat gave, plus one byte
    # to notice a file that grew (or reports no size, as /proc files do); then on in bounded chunks.
    chunks = [handle.read(min(size, limit) + 1)]
    total = len(chunks[0])
    while size < total <= limit:
        chunk = handle.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


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
        if "nesting depth" in str(exc.problem):  # libyaml's own limit (PyYAML >= 6.0.4 wheels): ours is lower
            raise InputError(f"{source}: nested more than {MAX_DEPTH} levels deep{_place(exc.problem_mark)}") \
                from None
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


def _check_depth(document: Any, source: str, *, limit: int = MAX_DEPTH) -> None:
    if shapes.deeper_than(document, limit):
        raise InputError(f"{source}: nested more than {MAX_DEPTH} levels deep")


def _place(mark: Any) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _plain(exc: ValueError) -> str:
    text = str(exc)
    if "digits" in text and "int" in text:
        return "a number has more digits than allowed (4,300)"
    return text.splitlines()[0] if text else type(exc).__name__


Each = Callable[[Any, str, str], Any]
"""``each(item, place, list_key)``: what to keep of one list item (checking it), ``place`` as ``pods[3]``."""


def load_streamed(path: str | os.PathLike[str], *, what: str = "file", each: Each,
                  check_depth: bool = True) -> list[Any]:
    """The documents of a file as `load_all` gives them, with every item of a ``List``'s ``items``, of a
    kind-less mapping's lists and of a top-level list replaced by ``each(item, place, list_key)``.

    For JSON (what ``kubectl get -o json`` writes) items are parsed one at a time and handed to ``each``
    at once, so a snapshot whose ``each`` keeps little never exists whole as Python objects (150,000
    pods: ~300 MB instead of ~750). Anything else, or JSON that msgspec refuses (numbers over 64 bits,
    nesting past the interpreter's limit), takes `load_all`'s path with the same ``each`` afterwards,
    and its errors. A `shapes.ShapeError` from ``each`` becomes an `InputError` naming the file.
    ``check_depth=False``: ``each`` bounds the nesting of what it keeps itself (no second walk of it here).
    """
    text = read_text(path, what=what)
    source = f"{what} {os.fspath(path)}"
    enabled = gc.isenabled()
    gc.disable()  # as in parse(): millions of new objects, no cycles
    try:
        try:
            documents = _streamed_json(text, source, each, check_depth)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            documents = None
        if documents is None:
            documents = [_each_item(d, lambda items, key: [each(x, f"{key}[{i}]", key) for i, x in enumerate(items)])
                         for d in parse(text, source=source)]
    except shapes.ShapeError as exc:
        raise InputError(f"{source}: {exc}") from None
    finally:
        if enabled:
            gc.enable()
    return documents


def _streams(key: str, document: Mapping[str, Any], kind: Any) -> bool:
    """Whether the list under ``key`` holds the items `load_streamed` hands to ``each``: a ``List``'s
    ``items``, or any list of a mapping without a kind (``kind``: the document's, decoded)."""
    return "kind" not in document or (key == "items" and str(kind).endswith("List"))


def _each_item(document: Any, apply: Callable[[list[Any], str], list[Any]]) -> Any:
    """``document`` with ``apply`` run over its item lists (the ones `load_streamed` streams)."""
    if isinstance(document, list):
        return apply(document, "")
    if isinstance(document, dict):
        kind = document.get("kind")
        return {k: apply(v, k) if isinstance(v, list) and _streams(k, document, kind) else v
                for k, v in document.items()}
    return document


def _streamed_json(text: str, source: str, each: Each, check_depth: bool) -> list[Any] | None:
    """`load_streamed`'s JSON path; None when the text is not one JSON object or list."""
    start = text.lstrip()[:1]
    if start not in ("{", "["):
        return None
    decoder = msgspec.json.Decoder()

    def stream(items: list[msgspec.Raw], key: str) -> list[Any]:
        out = []
        for index, item in enumerate(items):
            kept = each(decoder.decode(item), f"{key}[{index}]", key)
            if check_depth:  # an item sits two levels down (document, list): what each() keeps is bounded
                _check_depth(kept, f"{source}: {key}[{index}]", limit=MAX_DEPTH - 2)
            out.append(kept)
        return out

    if start == "[":
        return [stream(msgspec.json.decode(text, type=list[msgspec.Raw]), "")]
    top = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
    kind = decoder.decode(top["kind"]) if "kind" in top else None
    streamed = {k for k, raw in top.items() if _streams(k, top, kind) and memoryview(raw)[:1].tobytes() == b"["}
    document = {k: stream(msgspec.json.decode(raw, type=list[msgspec.Raw]), k) if k in streamed
                else decoder.decode(raw) for k, raw in top.items()}
    _check_depth({k: v for k, v in document.items() if k not in streamed}, source)
    return [document]


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
