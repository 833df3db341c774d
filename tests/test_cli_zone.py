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
        assert main(["zone", "--imds-document", str(path), "-o", "json", "--no-beta-labels"]) == 0
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


class TestGlobalOptions:
    """--log-level and --log-format work before and after the subcommand; help text is plain."""

    @pytest.mark.parametrize("argv", [
        ["--log-level", "debug", "--log-format", "json", "zone"],
        ["zone", "--log-level", "DEBUG", "--log-format", "json"],
        ["--log-level", "ERROR", "zone", "--log-level", "DEBUG", "--log-format", "json"],
    ])
    def test_either_place(self, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """The value given last (after the command) wins; one given only before the command is kept."""
        from cloudzones.services import logs
        seen: dict[str, str] = {}
        monkeypatch.setattr(logs, "configure", lambda *, level, fmt: seen.update(level=level, fmt=fmt))
        path = FIXTURES / "imds/azure/compute_zone3_docs.json"
        assert main([*argv, "--imds-document", str(path)]) == 0
        assert seen == {"level": "DEBUG", "fmt": "json"}

    def test_nested_command_takes_them(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """`plan outage --log-level INFO` parses (nested subcommands inherit the options)."""
        from cloudzones.cli import build_parser
        args = build_parser().parse_args(["plan", "outage", "--zone", "z", "-f", "x", "--log-level", "INFO"])
        assert args.log_level == "INFO" and args.log_format == "text"

    @pytest.mark.parametrize("command", ["zone", "volume-zone", "plan", "controller", "node-agent", "webhook", "lb",
                                         "simulate"])
    def test_help_has_no_rest_markup(self, command: str, capsys: pytest.CaptureFixture[str]) -> None:
        """No ``double backquotes`` in any command's --help."""
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0 and "``" not in capsys.readouterr().out

    def test_old_flag_names_still_work(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--no-beta (before --no-beta-labels) is still accepted, hidden from --help."""
        path = FIXTURES / "imds/azure/compute_zone3_docs.json"
        assert main(["zone", "--imds-document", str(path), "-o", "json", "--no-beta"]) == 0
        assert "failure-domain.beta.kubernetes.io/zone" not in json.loads(capsys.readouterr().out)["labels"]


class TestZoneRefusals:
    """Impossible or empty options are usage errors (exit 2), never a fallback to live metadata."""

    @pytest.mark.parametrize(("argv", "message"), [
        (["--node", ""], "--node needs a value, got an empty string"),
        (["--provider-id", " "], "--provider-id needs a value, got an empty string"),
        (["--imds-document", ""], "--imds-document needs a value, got an empty string"),
        (["--provider", "aws", "--node", "x"], "not supported for aws yet (only azure)"),
        (["--provider", "gcp", "--provider-id", "gce://p/z/i"], "not supported for gcp yet (only azure)"),
        (["--provider", "aws", "--imds-document", "x.json"], "cannot be used with --provider aws"),
    ])
    def test_usage_errors(self, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
        """Each gives exit 2 and one line on stderr naming the option."""
        assert main(["zone", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err

    @pytest.mark.parametrize(("compute", "message"), [
        ({"location": 0, "zone": "2"}, "compute.location must be a region name, got 0"),
        ({"location": "east us!", "zone": "2"}, "is not an Azure region name"),
        ({"location": "eastus", "platformFaultDomain": "x"}, "compute.platformFaultDomain must be a whole number"),
        ({"location": "eastus", "zone": "9" * 5000}, "instance metadata zone '99999"),
        ({"location": "eastus", "zone": "1234567890"}, "is not an integer zone id"),
    ])
    def test_wrong_values_in_imds_document(self, tmp_path: pathlib.Path, compute: dict[str, object], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """Well-typed but wrong IMDS values are refused with the field, exit 1."""
        path = tmp_path / "imds.json"
        path.write_text(json.dumps({"compute": compute}))
        assert main(["zone", "--imds-document", str(path)]) == 1
        assert message in capsys.readouterr().err


class TestHelpSaysExitCodes:
    """Every command's --help ends with the exit codes."""

    @pytest.mark.parametrize("argv", [[], ["zone"], ["plan", "outage"], ["lb", "plan"], ["controller"], ["simulate"]])
    def test_epilog(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """The epilog names 0, 1 and 2."""
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        assert "exit codes: 0 ok, 1 failure or error finding (one line on stderr), 2 usage error" in " ".join(
            capsys.readouterr().out.split())  # argparse wraps the epilog
