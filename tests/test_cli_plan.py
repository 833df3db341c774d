"""Tests for ``cloudzones plan``: each subcommand's output formats, findings and exit codes."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from cloudzones import cli

PLANS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "plans"
NODES = str(PLANS / "nodes-3zones.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``cloudzones plan ...`` with fixture names expanded; (exit code, stdout, stderr)."""
    args = [str(PLANS / a) if a.endswith(".yaml") and "/" not in a else a for a in argv]
    code = cli.main(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """Run with ``-o json``; (exit code, parsed stdout)."""
    code, out, _ = run(capsys, *argv, "-o", "json")
    return code, json.loads(out)


def rules(data: dict[str, Any]) -> list[str]:
    """Finding rules of a JSON plan."""
    return [f["rule"] for f in data["findings"]]


class TestReplication:
    """``plan replication``."""

    def test_table(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A valid stack: the header, one row per component, the findings, exit 0."""
        code, out, err = run(capsys, "replication", "-f", "loki-zone-aware.yaml", "--nodes", NODES)
        assert code == 0 and err == ""
        assert out.startswith("LokiStack logs: replication factor 2, 3 zone(s)")
        assert "tolerated zone failures: writes 0, reads 1" in out
        assert any(line.split()[:2] == ["ingester", "3"] for line in out.splitlines())
        assert "FINDINGS" in out and "stuck-if-zone-unavailable" in out

    def test_factor_above_zones_exits_1(self, capsys: pytest.CaptureFixture[str]) -> None:
        """factor 4 on 3 zones: JSON carries the error finding, exit 1, a count on stderr."""
        code, out, err = run(capsys, "replication", "-f", "loki-factor-too-high.yaml", "--nodes", NODES, "-o", "json")
        data = json.loads(out)
        assert code == 1 and data["ok"] is False and "factor-exceeds-zones" in rules(data)
        assert "1 error finding(s)" in err

    def test_missing_key_names_nodes(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Nodes without the zone label are named in the finding."""
        code, data = run_json(capsys, "replication", "-f", "loki-zone-aware.yaml", "--nodes", "nodes-missing-zone.yaml")
        message = next(f["message"] for f in data["findings"] if f["rule"] == "topology-key-missing")
        assert code == 1 and "'aks-pool1-1', 'aks-pool2-1'" in message

    def test_stuck_rollout(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Six ingesters against a cordoned zone: stuck, two placed, exit 1."""
        code, data = run_json(capsys, "replication", "-f", "loki-stuck.yaml", "--nodes", "nodes-zone3-cordoned.yaml")
        (ingester,) = data["components"]
        assert code == 1 and ingester["stuck"] and len(ingester["nodes"]) == 2 and "rollout-stuck" in rules(data)

    def test_multi_key_and_deprecated(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Two keys join with '_'; the deprecated field warns but passes."""
        code, data = run_json(capsys, "replication", "-f", "loki-multi-key.yaml", "--nodes", NODES)
        assert code == 0 and data["zones"] == ["eastus-1_eastus", "eastus-2_eastus", "eastus-3_eastus"]
        code, data = run_json(capsys, "replication", "-f", "loki-deprecated.yaml", "--nodes", NODES)
        assert code == 0 and "deprecated-replication-factor" in rules(data)

    def test_zone_injection_yaml(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--zone-injection adds the pieces with the chosen image; YAML output parses."""
        code, out, _ = run(capsys, "replication", "-f", "loki-zone-aware.yaml", "--nodes", NODES, "--zone-injection",
                           "--init-image", "registry.example/loki:3", "-o", "yaml")
        data = yaml.safe_load(out)
        assert code == 0 and data["zoneInjection"]["initContainers"][0]["image"] == "registry.example/loki:3"
        assert data["zoneInjection"]["annotations"] == ["topology.kubernetes.io/zone"]

    def test_nodes_inside_the_input_file(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
        """Node documents in the input count as nodes, without --nodes."""
        nodes = yaml.safe_load((PLANS / "nodes-3zones.yaml").read_text())["items"]
        stack = yaml.safe_load((PLANS / "loki-zone-aware.yaml").read_text())
        path = tmp_path / "all.yaml"
        path.write_text(yaml.safe_dump_all([stack, *nodes]))
        code, data = run_json(capsys, "replication", "-f", str(path))
        assert code == 0 and len(data["zones"]) == 3

    def test_malformed_input_prints_findings(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
        """A malformed stack prints its findings (not a traceback) and exits 1."""
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({"kind": "LokiStack", "metadata": {"name": "x"},
                                        "spec": {"replication": {"factor": 0, "zones": [{"maxSkew": 1}]}}}))
        code, out, err = run(capsys, "replication", "-f", str(path), "--nodes", NODES)
        assert code == 1 and "zone-topology-key" in out and "cloudzones plan: error:" in err

    def test_two_stacks_and_unreadable_file(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
        """Two LokiStacks in one file, or a missing file: exit 1 with a plain message."""
        path = tmp_path / "two.yaml"
        stack = yaml.safe_load((PLANS / "loki-zone-aware.yaml").read_text())
        path.write_text(yaml.safe_dump_all([stack, stack]))
        code, _, err = run(capsys, "replication", "-f", str(path))
        assert code == 1 and "exactly one LokiStack, found 2" in err
        code, _, err = run(capsys, "replication", "-f", str(tmp_path / "nope.yaml"))
        assert code == 1 and "cannot read" in err


class TestCoordinators:
    """``plan coordinators``."""

    def test_three_data_hall(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Nine storage coordinators, three per hall, in the table and in JSON."""
        code, out, _ = run(capsys, "coordinators", "-f", "fdb-three-data-hall.yaml", "--nodes", NODES)
        assert code == 0 and "three_data_hall" in out and "9 of 9 coordinator(s)" in out
        code, data = run_json(capsys, "coordinators", "-f", "fdb-three-data-hall.yaml", "--nodes", NODES)
        halls = [c["localities"]["locality_data_hall"] for c in data["coordinators"]]
        assert sorted(halls) == ["eastus-1"] * 3 + ["eastus-2"] * 3 + ["eastus-3"] * 3

    def test_hard_limits_and_the_what_if(self, capsys: pytest.CaptureFixture[str]) -> None:
        """zoneid = AZ: exit 1 with FDB's error text; --no-hard-limits picks 5 and warns."""
        code, data = run_json(capsys, "coordinators", "-f", "fdb-zoneid-is-az.yaml", "--nodes", NODES)
        assert code == 1 and len(data["coordinators"]) == 3 and "not-enough-coordinators" in rules(data)
        code, data = run_json(capsys, "coordinators", "-f", "fdb-zoneid-is-az.yaml", "--nodes", NODES,
                              "--no-hard-limits")
        assert code == 0 and len(data["coordinators"]) == 5 and "coordinators-share-zone" in rules(data)
        assert data["hardLimitsEnforced"] is False
        code, out, _ = run(capsys, "coordinators", "-f", "fdb-zoneid-is-az.yaml", "--nodes", NODES, "--no-hard-limits")
        assert "hard limits off (what-if; FoundationDB enforces zoneid=1)" in out


class TestLocality:
    """``plan locality``."""

    def test_fixture_table_and_exit(self, capsys: pytest.CaptureFixture[str]) -> None:
        """One row per volume with its action and reason; the strict-local and unknown-mode errors give exit 1."""
        code, out, _ = run(capsys, "locality", "-f", "longhorn-volumes.yaml")
        rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("pvc-") and "  " in line}
        assert code == 1 and rows["pvc-needs-local"][4] == "add-replica"
        assert rows["pvc-extra-same-disk"][4] == "remove-replica" and rows["pvc-legacy"][2] == "legacy"
        assert "pvc-no-fitting-disk: no replica on the attached node" in out

    def test_manifests_by_kind(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
        """Separate Volume / Replica / Node / Setting / StorageClass documents work like the mapping form."""
        data = yaml.safe_load((PLANS / "longhorn-volumes.yaml").read_text())
        volumes = [v for v in data["volumes"] if v["metadata"]["name"] == "pvc-needs-local"]
        settings = [{"apiVersion": "longhorn.io/v1beta2", "kind": "Setting", "metadata": {"name": k}, "value": v}
                    for k, v in data["settings"].items()]
        path = tmp_path / "docs.yaml"
        path.write_text(yaml.safe_dump_all([*volumes, *data["replicas"], *data["nodes"], *settings,
                                            data["storageClass"]]))
        code, result = run_json(capsys, "locality", "-f", str(path), "--nodes", NODES)
        assert code == 0 and [v["action"] for v in result["volumes"]] == ["add-replica"]

    def test_unexpected_kind(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
        """A kubernetes Node in the Longhorn input is refused (it belongs in --nodes)."""
        path = tmp_path / "x.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}))
        code, _, err = run(capsys, "locality", "-f", str(path))
        assert code == 1 and "unexpected Node" in err


class TestOutage:
    """``plan outage``."""

    def test_table(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Losing eastus-1: sections for workloads, stranded pods and coordinators; exit 1 (quorum lost)."""
        code, out, err = run(capsys, "outage", "--zone", "eastus-1", "-f", "snapshot-3zones.yaml")
        assert code == 1 and out.startswith("losing zone eastus-1: 2 node(s)")
        for heading in ("WORKLOADS", "UNSCHEDULABLE PODS", "FOUNDATIONDB COORDINATORS", "FINDINGS"):
            assert heading in out
        assert "quorum-lost" in out and "4 error finding(s)" in err

    def test_fault_domain_said(self, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
        """An unzoned node's fault domain ("0") is said to be one, not a zone."""
        path = tmp_path / "snap.yaml"
        path.write_text(yaml.safe_dump_all([{"kind": "Node", "metadata": {"name": n, "labels": {
            "topology.kubernetes.io/zone": n[-1]}}} for n in ("u-0", "u-1")]))
        code, out, _ = run(capsys, "outage", "--zone", "0", "-f", str(path))
        assert code == 0 and out.startswith("losing fault domain 0: 1 node(s)"), out

    def test_json(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The JSON report names the stranded pods and the lost coordinators."""
        code, data = run_json(capsys, "outage", "--zone", "eastus-1", "-f", "snapshot-3zones.yaml")
        assert code == 1 and [p["pod"] for p in data["unschedulable"]] == ["app/postgres-0", "infra/etcd-0"]
        assert [c["survives"] for c in data["coordinators"]] == [False, True]

    def test_unknown_zone_and_usage(self, capsys: pytest.CaptureFixture[str]) -> None:
        """An unknown zone exits 1 naming the zones; a missing --zone is a usage error (2)."""
        code, out, _ = run(capsys, "outage", "--zone", "westus-1", "-f", "snapshot-3zones.yaml")
        assert code == 1 and "unknown-zone" in out and "'eastus-2'" in out
        with pytest.raises(SystemExit) as caught:
            cli.main(["plan", "outage", "-f", str(PLANS / "snapshot-3zones.yaml")])
        capsys.readouterr()
        assert caught.value.code == 2

    def test_registered(self) -> None:
        """The plan module is in the CLI registry."""
        assert "cloudzones.cli.plan" in cli._COMMAND_MODULES
