"""The one input-file loader: hostile files give one line naming the file and the place, never a traceback or a hang."""

from __future__ import annotations

import contextlib
import gc
import os
import pathlib
import subprocess
import sys

import pytest

from cloudzones import documents, errors, shapes
from cloudzones.documents import InputError


def write(tmp_path: pathlib.Path, data: bytes | str, name: str = "in.yaml") -> pathlib.Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


class TestLoader:
    """read_text / load_all refuse what is not a small UTF-8 YAML or JSON file, with the file's name."""

    @pytest.mark.parametrize(("data", "message"), [
        (b"a: \xff\xfe", "not UTF-8 text (byte 0xff at offset 3)"),
        ("[" * 5000 + "]" * 5000, "nested more than 64 levels deep"),
        ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 80)), "nested more than 64 levels deep"),
        ("x: " + "9" * 5000, "a number has more digits than allowed (4,300)"),
        ('{"x": ' + "9" * 5000 + "}", "a number has more digits than allowed (4,300)"),
        ("a: &a [1]\nb: *a\n", "YAML aliases (*name) are not accepted: the anchored node (line 1, column 4) is used twice"),
        ("!!python/object/apply:os.system ['true']\n", "not valid YAML or JSON: could not determine a constructor"),
        ("a: [1, 2\n", "not valid YAML or JSON"),
    ])
    def test_hostile_content(self, tmp_path: pathlib.Path, data: bytes | str, message: str) -> None:
        """Each hostile content is one InputError line naming the file and what is wrong."""
        path = write(tmp_path, data)
        with pytest.raises(InputError) as info:
            documents.load_all(path, what="nodes file")
        text = str(info.value)
        assert text.startswith(f"nodes file {path}: ") and message in text and "\n" not in text

    def test_deep_nesting_does_not_crash(self, tmp_path: pathlib.Path) -> None:
        """100,000 levels in flow and block YAML and in JSON: one line each, in a child process.

        A child, because the failure this guards against is the process dying (PyYAML 6.0.3's C composer
        recursed until a segmentation fault), which would take the test run down with it.
        """
        texts = {"flow.yaml": "[" * 100_000, "block.yaml": "- " * 100_000, "map.json": '{"a":' * 100_000,
                 "map.yaml": "{a: " * 100_000}
        for name, text in texts.items():
            write(tmp_path, text, name)
        script = ("import sys\nfrom cloudzones import documents\n"
                  "for path in sys.argv[1:]:\n"
                  "    try:\n        documents.load_all(path)\n"
                  "    except documents.InputError as exc:\n        print(exc)\n")
        child = subprocess.run([sys.executable, "-c", script, *(str(tmp_path / n) for n in texts)],
                               capture_output=True, text=True, timeout=120, check=False)
        assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-500:]}"
        lines = child.stdout.splitlines()
        assert len(lines) == len(texts) and all("nested more than 64 levels deep" in line for line in lines), lines

    def test_directory(self, tmp_path: pathlib.Path) -> None:
        """A directory is refused before any read."""
        with pytest.raises(InputError, match=r"^plan .*: a directory$"):
            documents.load_all(tmp_path, what="plan")

    def test_device_is_not_read(self) -> None:
        """/dev/zero (endless) is refused as not a regular file, at once."""
        with pytest.raises(InputError, match="not a regular file"):
            documents.load_all("/dev/zero")

    def test_fifo_does_not_hang(self, tmp_path: pathlib.Path) -> None:
        """A FIFO with a writer attached is refused (never read until the writer closes)."""
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer, so opening for reading does not block
        try:
            with pytest.raises(InputError, match="not a regular file"):
                documents.load_all(fifo)
        finally:
            os.close(writer)

    def test_missing_and_empty_path(self, tmp_path: pathlib.Path) -> None:
        """A missing file names the OS reason; an empty path is refused (never the current directory)."""
        with pytest.raises(InputError, match="cannot read: No such file or directory"):
            documents.load_all(tmp_path / "nope.yaml")
        with pytest.raises(InputError, match="an empty path was given"):
            documents.load_all("", what="StorageClass")

    def test_size_cap(self, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Over the cap is refused with the cap and how to raise it; the variable raises it."""
        path = write(tmp_path, "a: " + "x" * (2 * 1024 * 1024))
        monkeypatch.setenv("CLOUDZONES_MAX_INPUT_MIB", "1")
        with pytest.raises(InputError, match=r"larger than 1 MiB \(set CLOUDZONES_MAX_INPUT_MIB to allow more\)"):
            documents.load_all(path)
        monkeypatch.setenv("CLOUDZONES_MAX_INPUT_MIB", "3")
        assert documents.load_all(path)[0]["a"].startswith("x")
        monkeypatch.setenv("CLOUDZONES_MAX_INPUT_MIB", "9" * 30)  # read() once allocated the whole limit first
        assert documents.load_all(path)[0]["a"].startswith("x")
        monkeypatch.setenv("CLOUDZONES_MAX_INPUT_MIB", "lots")
        with pytest.raises(InputError, match="CLOUDZONES_MAX_INPUT_MIB must be a positive whole number"):
            documents.load_all(path)

    def test_file_without_a_size(self) -> None:
        """A /proc file (fstat says 0 bytes) is read whole, not cut at the size fstat gave."""
        assert "Name:" in documents.read_text("/proc/self/status")

    def test_json_and_yaml(self, tmp_path: pathlib.Path) -> None:
        """JSON, multi-document YAML, and YAML flow style starting with a brace all load; empty documents drop."""
        assert documents.load_all(write(tmp_path, '{"a": 1}')) == [{"a": 1}]
        assert documents.load_all(write(tmp_path, "a: 1\n---\n---\nb: 2\n")) == [{"a": 1}, {"b": 2}]
        assert documents.load_all(write(tmp_path, "{a: 1}")) == [{"a": 1}]

    def test_errors_are_config_errors(self) -> None:
        """InputError is a ConfigError, so every command maps it to exit 1 with one line."""
        assert issubclass(InputError, errors.ConfigError)


class TestManifests:
    """manifests() flattens Lists and checks each manifest's shape with its path."""

    def test_flattening(self, tmp_path: pathlib.Path) -> None:
        """NodeList items, YAML lists and separate documents all become one list."""
        text = "kind: NodeList\nitems: [{metadata: {name: a}}]\n---\n- {kind: Node, metadata: {name: b}}\n"
        assert [m["metadata"]["name"] for m in documents.manifests(write(tmp_path, text), kind="Node")] == ["a", "b"]

    @pytest.mark.parametrize(("text", "message"), [
        ("kind: Node\nmetadata: x\n", "document 1: metadata: expected a mapping, got a string"),
        ("kind: Node\nmetadata: {labels: [a]}\n", "document 1: metadata.labels: expected a mapping, got a list"),
        ("kind: Node\nmetadata: {labels: {topology.kubernetes.io/zone: {}}}\n",
         "metadata.labels.topology.kubernetes.io/zone: expected a string, got a mapping"),
        ("kind: List\nitems: [{kind: Node, status: {conditions: [Ready]}}]\n",
         "document 1.items[0]: status.conditions[0]: expected a mapping, got a string"),
        ("kind: List\nitems: 3\n", "document 1.items: expected a list, got a number"),
        ("- 7\n", "document 1[0]: expected a manifest (a mapping), got a number"),
        ("kind: Pod\n", "document 1: expected a Node, got a Pod"),
    ])
    def test_wrong_shapes(self, tmp_path: pathlib.Path, text: str, message: str) -> None:
        """A wrong type anywhere we read is reported with its path."""
        with pytest.raises(InputError) as info:
            documents.manifests(write(tmp_path, text), what="nodes file", kind="Node")
        assert message in str(info.value)


class TestShapes:
    """shapes.check: types of the fields we read, null as absent, booleans are not numbers."""

    def test_null_is_absent(self) -> None:
        """A null field passes whatever its schema."""
        shapes.check({"metadata": None, "spec": {"taints": None}}, shapes.NODE)

    def test_bool_is_not_a_number(self) -> None:
        """maxSkew: true is refused though True is an int to Python."""
        with pytest.raises(shapes.ShapeError, match=r"topologySpreadConstraints\[0\]\.maxSkew: expected a whole number"):
            shapes.check({"spec": {"topologySpreadConstraints": [{"maxSkew": True}]}}, shapes.POD)

    def test_unknown_fields_ignored(self) -> None:
        """Fields no code of ours reads are not checked."""
        shapes.check({"spec": {"whatever": [1, {"x": 2}]}}, shapes.NODE)

    def test_first_error_in_document_order(self) -> None:
        """With several wrong fields, the first in field order is named."""
        with pytest.raises(shapes.ShapeError) as info:
            shapes.check({"metadata": {"labels": 1, "annotations": 2}}, shapes.NODE)
        assert info.value.path == "metadata.annotations"


class TestNullItems:
    """null is absent for a field, never an item of a list or a value of a map (found by the campaign)."""

    @pytest.mark.parametrize(("value", "schema", "path"), [
        ({"nodes": [None]}, shapes.SNAPSHOT, "nodes[0]"),
        ({"volumes": [None]}, shapes.LONGHORN_INPUT, "volumes[0]"),
        ({"metadata": {"labels": {"a": None}}}, shapes.NODE, "metadata.labels.a"),
    ])
    def test_null_item_refused(self, value: dict[str, object], schema: shapes.Schema, path: str) -> None:
        """The null item is named by its path."""
        with pytest.raises(shapes.ShapeError) as info:
            shapes.check(value, schema)
        assert info.value.path == path and "got nothing (null)" in str(info.value)


class TestPeerJson:
    """peer_json: an API's JSON answer, nesting past the recursion limit a ValueError, no collection meanwhile."""

    def test_values_and_errors(self) -> None:
        """JSON decodes; not JSON and nesting too deep are ValueErrors, the latter NestedTooDeeply."""
        assert documents.peer_json(b'{"a": [1]}') == {"a": [1]}
        with pytest.raises(ValueError):
            documents.peer_json(b"{nope")
        with pytest.raises(documents.NestedTooDeeply):
            documents.peer_json(b"[" * 100_000 + b"]" * 100_000)

    def test_no_finalizer_runs_at_the_recursion_limit(self) -> None:
        """Garbage waiting for the collector is not finalized deep inside the parse, where its finalizer has no
        stack left (CI once saw five such finalizers fail), and the collector is on again afterwards."""
        headrooms: list[int] = []

        class Cycle:
            def __init__(self) -> None:
                self.me = self

            def __del__(self) -> None:
                headrooms.append(headroom())

        deep, threshold = b"[" * 100_000 + b"]" * 100_000, gc.get_threshold()
        gc.collect()  # before the cycle is made: it must be young, for the first collection to take it
        held = [Cycle()]
        # The first collection comes after this many new objects: one list per level, so 10 levels short of the
        # recursion limit. json.loads with the collector on finalizes the cycle there, with ~10 frames to spare.
        gc.set_threshold(headroom() - 10, 1, 1)
        try:
            held.clear()  # garbage now: only the collector can free it
            with pytest.raises(documents.NestedTooDeeply):
                documents.peer_json(deep)
        finally:
            gc.set_threshold(*threshold)
        gc.collect()
        assert len(headrooms) == 1 and headrooms[0] > 100 and gc.isenabled(), headrooms


def headroom() -> int:
    """How many more nested Python calls the recursion limit allows here."""
    depth = 0

    def deeper() -> None:
        nonlocal depth
        depth += 1
        deeper()

    with contextlib.suppress(RecursionError):
        deeper()
    return depth
