"""Tests for ``cloudzones zone`` and the command line's exit codes."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from cloudzones.cli import main
from tests.conftest import FIXTURES


class TestZoneCommand:
    """cloudzones zone prints topology and labels."""

    def test_table_from_document(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A saved IMDS document gives a table with the zone and labels."""
        assert main(["zone", "--imds-document", str(FIXTURES / "imds/azure/compute_zone3_docs.json")]) == 0
        out = capsys.readouterr().out
        assert "westus-3" in out and "label topology.kubernetes.io/zone" in out

    def test_json_unzoned(self, capsys: pytest.CaptureFixture[str]) -> None:
        """JSON output says the fault domain is not an availability zone and adds the fault-domain label."""
        path = FIXTURES / "imds/azure/instance_full_no_zone_vmss_docs.json"
        assert main(["zone", "--imds-document", str(path), "-o", "json", "--no-beta"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["availabilityZone"] is False and data["zone"] == "36"
        assert data["labels"] == {"topology.kubernetes.io/region": "westus", "topology.kubernetes.io/zone": "36",
                                  "topology.kubernetes.azure.com/fault-domain": "36"}

    def test_yaml(self, capsys: pytest.CaptureFixture[str]) -> None:
        """YAML output parses."""
        main(["zone", "--imds-document", str(FIXTURES / "imds/azure/compute_zone1_otel.json"), "-o", "yaml"])
        assert yaml.safe_load(capsys.readouterr().out)["zone"] == "westus-1"

    def test_failure_exit_1(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A contract error exits 1 with the message on stderr and nothing on stdout."""
        bad = tmp_path / "imds.json"
        bad.write_text('{"compute": {"location": "eastus", "zone": "a"}}')
        assert main(["zone", "--imds-document", str(bad)]) == 1
        captured = capsys.readouterr()
        assert captured.out == "" and "'a'" in captured.err

    def test_usage_exit_2(self) -> None:
        """A usage error exits 2."""
        with pytest.raises(SystemExit) as info:
            main(["zone", "--node", "a", "--provider-id", "b"])
        assert info.value.code == 2
