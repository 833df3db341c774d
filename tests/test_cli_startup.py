"""The command line starts fast: ``--help`` and the offline commands import only what they use.

Timing lives in bench/cli_startup.py; these tests check the cause instead (which modules a fresh
interpreter ends up importing), which does not depend on how busy the machine is.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

import pytest

from cloudzones import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
IMDS = ROOT / "fixtures" / "imds" / "azure" / "instance_legacy_2017-04-02_no_zone_docs.json"


def imported_by(*argv: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``cloudzones ARGV`` (exit code ignored)."""
    snippet = ("import contextlib, io, json, sys\n"
               "from cloudzones.cli import main\n"
               "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
               "    try:\n"
               f"        main({list(argv)!r})\n"
               "    except SystemExit:\n"
               "        pass\n"
               "print(json.dumps(sorted(sys.modules)))\n")
    answer = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(answer.stdout))


class TestLazyCommands:
    """Subcommand modules load only when chosen."""

    def test_help_imports_no_command(self) -> None:
        """``cloudzones --help`` lists every command without importing one, nor kubernetes or an Azure SDK."""
        modules = imported_by("--help")
        assert not {m for m in modules if m.startswith(("cloudzones.cli.", "kubernetes", "azure"))
                    and m not in ("cloudzones.cli.__main__",)}, sorted(m for m in modules if "cli." in m)

    def test_zone_document_skips_arm(self) -> None:
        """Reading an IMDS document needs neither the ARM SDKs nor the kubernetes client."""
        modules = imported_by("zone", "--imds-document", str(IMDS))
        assert "cloudzones.cli.zone" in modules
        assert not {m for m in modules if m.startswith(("azure.mgmt", "kubernetes", "cloudzones.cli.controller"))}

    @pytest.mark.parametrize("argv", [("controller", "--help"), ("provisioner", "--help"), ("plan", "--help")])
    def test_network_sdk_only_for_lb(self, argv: tuple[str, ...]) -> None:
        """azure-mgmt-network (about 2 s of CPU to import) is left to ``lb``."""
        assert not {m for m in imported_by(*argv) if m.startswith("azure.mgmt.network")}

    def test_help_lines_agree(self) -> None:
        """The one-line help listed without importing equals what each module registers."""
        parser = cli.build_parser()
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        registered = {choice.dest: choice.help for choice in action._choices_actions}
        assert registered == {name: text for name, (_, text) in cli._COMMANDS.items()}

    @pytest.mark.parametrize(("argv", "command"), [
        (["zone"], "zone"),
        (["--log-level", "INFO", "controller", "--workers", "2"], "controller"),
        (["--log-level=INFO", "plan", "outage"], "plan"),
        (["--help", "zone"], None),
        (["zonee"], None),
        ([], None),
        (["--log-format", "json"], None),
    ])
    def test_chosen_command(self, argv: list[str], command: str | None) -> None:
        """The command is the first word after the global options; help or a typo choose none."""
        assert cli.chosen_command(argv) == command

    def test_typo_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A misspelt command is still argparse's one-line usage error, exit 2."""
        with pytest.raises(SystemExit) as info:
            cli.main(["zonee"])
        assert info.value.code == 2 and "invalid choice: 'zonee'" in capsys.readouterr().err
