"""Tests for ``cloudzones volume-zone``: the zone chosen and the deciding rule, or the rule that failed."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

import storageclass
from cloudzones import cli

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "storageclass"


def run(capsys: pytest.CaptureFixture[str], *argv: str | pathlib.Path) -> tuple[int, str, str]:
    """Run the CLI with fixture-relative paths; (exit code, stdout, stderr)."""
    args = [str(FIXTURES / a) if str(a).endswith(".yaml") and not pathlib.Path(a).is_absolute() else str(a)
            for a in argv]
    code = cli.main(["volume-zone", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str | pathlib.Path) -> tuple[int, dict[str, Any]]:
    """Run with -o json; (exit code, parsed stdout)."""
    code, out, _ = run(capsys, *argv, "-o", "json")
    return code, json.loads(out)


class TestVolumeZone:
    """The command prints the choice and its rule, and fails with the broken rule."""

    def test_active_zones_table(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An Immediate class over mixed nodes: a zone with nodes, rule active-zones, and the reason."""
        code, out, err = run(capsys, "--storage-class", "sc-zoned.yaml", "--pvc", "pvc-statefulset.yaml",
                             "--nodes", "nodes-mixed.yaml")
        assert code == 0 and err == ""
        header, row, reason = out.splitlines()
        assert header.split() == ["PVC", "STORAGECLASS", "ZONES", "RULE"]
        assert row.split()[0] == "data-svc7-db-0" and row.split()[3] == "active-zones"
        assert row.split()[2] in ("westus-1", "westus-2")
        assert reason.startswith("reason: ") and "westus-1, westus-2" in reason

    def test_matches_library(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The CLI's zone is select_zones' zone, in both modes; fault domains are reported as ignored."""
        for mode in storageclass.MODES:
            code, data = run_json(capsys, "--storage-class", "sc-zoned.yaml", "--pvc", "pvc-statefulset.yaml",
                                  "--nodes", "nodes-mixed.yaml", "--mode", mode)
            spec = storageclass.StorageClassSpec.from_manifest(
                yaml.safe_load((FIXTURES / "sc-zoned.yaml").read_text()), region="westus")
            expected = storageclass.select_zones(spec, pvc_name="data-svc7-db-0", mode=mode,
                                                 active_zones=["westus-1", "westus-2", "0", "36"])
            assert code == 0 and data["zones"] == expected and data["mode"] == mode
            assert data["ignored"] == ["0", "36"] and data["region"] == "westus"

    def test_wait_for_first_consumer(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The claim's selected-node annotation and StatefulSet owner are used."""
        code, data = run_json(capsys, "--storage-class", "sc-wffc-allowed.yaml", "--pvc", "pvc-wffc.yaml",
                              "--nodes", "nodes-mixed.yaml")
        assert code == 0 and data["ok"] is True
        assert (data["zones"], data["rule"]) == (["westus-2"], "selected-node")
        assert (data["selectedNode"], data["statefulset"]) == ("aks-zoned-vmss000001", "web")

    def test_selected_node_option(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--selected-node overrides the annotation."""
        code, data = run_json(capsys, "--storage-class", "sc-wffc-allowed.yaml", "--pvc", "pvc-wffc.yaml",
                              "--nodes", "nodes-mixed.yaml", "--selected-node", "aks-zoned-vmss000000")
        assert code == 0 and data["zones"] == ["westus-1"]

    def test_unzoned_selected_node_fails(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A fault-domain node cannot host a zoned disk: exit 1, rule selected-node."""
        code, out, err = run(capsys, "--storage-class", "sc-wffc-allowed.yaml", "--pvc", "pvc-wffc.yaml",
                             "--nodes", "nodes-mixed.yaml", "--selected-node", "examplevmname", "-o", "yaml")
        data = yaml.safe_load(out)
        assert code == 1 and data["ok"] is False and data["rule"] == "selected-node"
        assert "fault domain" in data["error"] and "fault domain" in err

    def test_invalid_storage_class_fails(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A class breaking a rule: exit 1, the rule in the table and the values on stderr."""
        code, out, err = run(capsys, "--storage-class", "sc-invalid-zone-wffc.yaml", "--pvc", "pvc-wffc.yaml",
                             "--nodes", "nodes-mixed.yaml")
        assert code == 1
        assert "zone-with-wait-for-first-consumer" in out and "(failed)" in out
        assert "zone='westus-1'" in err and "allowedTopologies" in err

    def test_no_zoned_nodes_fails(self, capsys: pytest.CaptureFixture[str]) -> None:
        """No nodes at all: NoZonedNodes, exit 1, rule active-zones."""
        code, data = run_json(capsys, "--storage-class", "sc-zoned.yaml", "--pvc", "pvc-statefulset.yaml")
        assert code == 1 and data["rule"] == "active-zones" and data["zones"] == []

    def test_region_option(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--region eastus makes westus node zones foreign: none are active."""
        code, data = run_json(capsys, "--storage-class", "sc-zoned.yaml", "--pvc", "pvc-statefulset.yaml",
                              "--nodes", "nodes-mixed.yaml", "--region", "eastus")
        assert code == 1 and data["rule"] == "active-zones" and "westus-1" in data["error"]

    def test_zone_redundant(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A ZRS class: no zone, rule zone-redundant, exit 0."""
        code, data = run_json(capsys, "--storage-class", "sc-zrs.yaml", "--pvc", "pvc-statefulset.yaml")
        assert code == 0 and (data["zones"], data["rule"]) == ([], "zone-redundant")

    @pytest.mark.parametrize("layout", ["list", "documents"])
    def test_node_file_layouts(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path,
                               layout: str) -> None:
        """Nodes may also come as a YAML list of Node manifests or as several documents."""
        items = yaml.safe_load((FIXTURES / "nodes-mixed.yaml").read_text())["items"]
        path = tmp_path / "nodes.yaml"
        path.write_text(yaml.safe_dump(items) if layout == "list" else yaml.safe_dump_all(items))
        code, data = run_json(capsys, "--storage-class", "sc-zoned.yaml", "--pvc", "pvc-statefulset.yaml",
                              "--nodes", path)
        assert code == 0 and data["candidates"] == ["westus-1", "westus-2"]

    def test_selected_node_needs_nodes(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A selected node without --nodes is a usage error (exit 2)."""
        code, _, err = run(capsys, "--storage-class", "sc-wffc-allowed.yaml", "--pvc", "pvc-wffc.yaml")
        assert code == 2 and "--nodes" in err

    def test_unknown_selected_node(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A selected node missing from the node file is an error naming it."""
        code, _, err = run(capsys, "--storage-class", "sc-wffc-allowed.yaml", "--pvc", "pvc-wffc.yaml",
                           "--nodes", "nodes-mixed.yaml", "--selected-node", "ghost")
        assert code == 1 and "'ghost'" in err

    def test_bad_files(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
        """Missing files, bad YAML and wrong kinds are errors naming the file."""
        missing = tmp_path / "missing.yaml"
        code, _, err = run(capsys, "--storage-class", missing, "--pvc", "pvc-statefulset.yaml")
        assert code == 1 and "missing.yaml" in err
        broken = tmp_path / "broken.yaml"
        broken.write_text("kind: [")
        code, _, err = run(capsys, "--storage-class", broken, "--pvc", "pvc-statefulset.yaml")
        assert code == 1 and "not valid YAML" in err
        code, _, err = run(capsys, "--storage-class", "pvc-statefulset.yaml", "--pvc", "pvc-statefulset.yaml")
        assert code == 1 and "document 1: expected a StorageClass, got a PersistentVolumeClaim" in err
        pods = tmp_path / "pods.yaml"
        pods.write_text(yaml.safe_dump({"kind": "List", "items": [{"kind": "Pod"}]}))
        code, _, err = run(capsys, "--storage-class", "sc-zoned.yaml", "--pvc", "pvc-statefulset.yaml",
                           "--nodes", pods)
        assert code == 1 and "a Pod" in err

    def test_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Missing required options exit 2."""
        with pytest.raises(SystemExit) as info:
            cli.main(["volume-zone", "--pvc", "x.yaml"])
        assert info.value.code == 2
        assert "--storage-class" in capsys.readouterr().err
