"""Any bytes, and any well-formed YAML of any shape, in any file argument of any command: never a traceback.

Each command must end with exit 0, 1 (one error line on stderr) or 2 (usage), whatever the file holds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import re
import tempfile
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudzones.cli import main
from tests.conftest import FIXTURES

# CLOUDZONES_FUZZ_EXAMPLES=1000 for a longer, randomised campaign; by default (CI) the examples are the same
# every run, so a red CI is a regression, never a new random find.
SCALE = int(os.environ.get("CLOUDZONES_FUZZ_EXAMPLES", "0")) or None
PLANS = FIXTURES / "plans"
NODES = str(PLANS / "nodes-3zones.yaml")
SC = str(FIXTURES / "storageclass" / "sc-zoned.yaml")
PVC = str(FIXTURES / "storageclass" / "pvc-statefulset.yaml")

# Each command line, with FILE where the hostile file goes.
COMMANDS: list[list[str]] = [
    ["volume-zone", "--storage-class", "FILE", "--pvc", PVC],
    ["volume-zone", "--storage-class", SC, "--pvc", "FILE"],
    ["volume-zone", "--storage-class", SC, "--pvc", PVC, "--nodes", "FILE"],
    ["plan", "replication", "-f", "FILE", "--nodes", NODES],
    ["plan", "replication", "-f", str(PLANS / "loki-zone-aware.yaml"), "--nodes", "FILE"],
    ["plan", "coordinators", "-f", "FILE", "--nodes", NODES],
    ["plan", "locality", "-f", "FILE"],
    ["plan", "outage", "--zone", "eastus-1", "-f", "FILE"],
    ["report", "-f", "FILE"],
    ["lb", "plan", "--nodes", "FILE"],
    ["zone", "--imds-document", "FILE"],
    ["simulate", "FILE"],
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False),
                    st.text(max_size=12), st.sampled_from(["Node", "Pod", "List", "eastus-1", "metadata", "spec"]))
keys = st.sampled_from(["kind", "metadata", "spec", "status", "items", "labels", "name", "nodes", "pods",
                        "replication", "processes", "zones", "parameters", "provisioner", "compute", "location",
                        "zone", "nodeAffinity", "topologySpreadConstraints", "volumes", "replicas"])
documents = st.recursive(scalars, lambda children: st.one_of(st.lists(children, max_size=4),
                                                             st.dictionaries(keys, children, max_size=5)),
                         max_leaves=25)


def run(argv: list[str], content: bytes) -> None:
    """Run ``argv`` with ``content`` as its FILE; assert a clean exit."""
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "input.yaml"
        path.write_bytes(content)
        args = [str(path) if a == "FILE" else a for a in argv]
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code: Any = main(args)
            except SystemExit as exc:
                code = exc.code
    text = err.getvalue()
    assert code in (0, 1, 2), f"{argv}: exit {code}\n{text}"
    assert "Traceback" not in text, f"{argv} with {content[:200]!r}:\n{text}"
    if code == 1:
        errors = [line for line in text.splitlines() if line.startswith("cloudzones")]
        assert len(errors) == 1, f"{argv}: expected one error line, got:\n{text}"
        assert len(errors[0]) <= 2000, f"{argv}: a {len(errors[0]):,}-character error line: {errors[0][:300]}"


class TestAnyBytes:
    """Random bytes in every file argument."""

    @pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:3]))
    @settings(derandomize=SCALE is None, max_examples=SCALE or 25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(content=st.binary(max_size=300))
    def test_bytes(self, argv: list[str], content: bytes) -> None:
        """Whatever the bytes, a clean exit."""
        run(argv, content)


class TestAnyShape:
    """Well-formed YAML of random shapes (mappings, lists, scalars with the keys we read)."""

    @pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:3]))
    @settings(derandomize=SCALE is None, max_examples=SCALE or 40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(document=documents)
    def test_shapes(self, argv: list[str], document: Any) -> None:
        """Whatever the shape, a clean exit."""
        run(argv, yaml.safe_dump(document).encode())


manifests = st.fixed_dictionaries(
    {"kind": st.sampled_from(["Node", "Pod", "StorageClass", "PersistentVolumeClaim", "PersistentVolume", "StatefulSet",
                              "LokiStack", "FoundationDBCluster", "Volume", "Replica", "Setting", "List"])},
    optional={"metadata": documents, "spec": documents, "status": documents, "items": st.lists(documents, max_size=3),
              "provisioner": documents, "parameters": documents, "processes": documents, "compute": documents})


class TestAnyManifest:
    """Manifests of the kinds we read, with random fields: the planners' own checks, not only the loader's."""

    @pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:3]))
    @settings(derandomize=SCALE is None, max_examples=SCALE or 60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(items=st.lists(manifests, min_size=1, max_size=3))
    def test_manifests(self, argv: list[str], items: list[Any]) -> None:
        """Whatever the fields, a clean exit."""
        run(argv, yaml.safe_dump_all(items).encode())


SNAPSHOT_COMMANDS = [argv for argv in COMMANDS if argv[0] == "report" or argv[:2] == ["plan", "outage"]]


class TestAnyJsonSnapshot:
    """The snapshot readers take JSON item by item (documents.load_streamed): the same hostile shapes as JSON."""

    @pytest.mark.parametrize("argv", SNAPSHOT_COMMANDS, ids=lambda a: " ".join(a[:3]))
    @settings(derandomize=SCALE is None, max_examples=SCALE or 60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(items=st.lists(manifests, min_size=1, max_size=3), form=st.sampled_from(["List", "mapping", "array"]))
    def test_manifests(self, argv: list[str], items: list[Any], form: str) -> None:
        """A kubectl List, the single-mapping form or a bare array of random manifests: a clean exit."""
        document = {"List": {"apiVersion": "v1", "kind": "List", "items": items},
                    "mapping": {"nodes": items[:1], "pods": items[1:]}, "array": items}[form]
        run(argv, json.dumps(document).encode())

    @pytest.mark.parametrize("argv", SNAPSHOT_COMMANDS, ids=lambda a: " ".join(a[:3]))
    @settings(derandomize=SCALE is None, max_examples=SCALE or 40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(document=documents)
    def test_shapes(self, argv: list[str], document: Any) -> None:
        """Any JSON shape: a clean exit."""
        run(argv, json.dumps(document).encode())


# The real input each FILE slot takes, for TestHugeNumbers.
NATURAL = [PVC, SC, str(PLANS / "nodes-3zones.yaml"), str(PLANS / "loki-zone-aware.yaml"), NODES,
           str(PLANS / "fdb-three-data-hall.yaml"), str(PLANS / "longhorn-volumes.yaml"),
           str(PLANS / "snapshot-3zones.yaml"), str(PLANS / "snapshot-3zones.yaml"), NODES,
           str(FIXTURES / "imds" / "azure" / "GetInstanceMetadata_2021-11-15.spec-example.json"),
           str(FIXTURES / "scenarios" / "default.yaml")]


def grown(value: Any) -> Any:
    """``value`` with every run of digits inside its strings led by 5,000 nines (distinct values stay distinct)."""
    if isinstance(value, str):
        return re.sub(r"[0-9]+", lambda digits: "9" * 5000 + digits[0], value)
    if isinstance(value, list):
        return [grown(v) for v in value]
    if isinstance(value, dict):
        return {k: grown(v) for k, v in value.items()}
    return value


class TestHugeNumbers:
    """Real inputs with every number in their strings grown past int()'s 4,300-digit limit (zones, ordinals,
    annotations, sizes, selector values): a clean exit, never the ValueError int() raises."""

    @pytest.mark.parametrize(("argv", "natural"), list(zip(COMMANDS, NATURAL, strict=True)),
                             ids=lambda a: " ".join(a[:3]) if isinstance(a, list) else "")
    def test_grown(self, argv: list[str], natural: str) -> None:
        """Every number in every string of the real file, 5,000 digits long: a clean exit."""
        real = list(yaml.safe_load_all(pathlib.Path(natural).read_text(encoding="utf-8")))
        run(argv, yaml.safe_dump_all([grown(d) for d in real], width=10**6).encode())
