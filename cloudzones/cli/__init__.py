"""The ``cloudzones`` command line: one module per subcommand, data on stdout, logs on stderr.

Exit codes: 0 success, 1 failure (a ``CloudZonesError``), 2 usage error (argparse's, or a ``UsageError``),
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from cloudzones import errors

# Each module defines ``register(subparsers)``; the order is the order of ``--help``. The one-line help is
# repeated here so that ``cloudzones --help`` lists every command without importing any of them (the service
# commands pull in the kubernetes client and the Azure SDKs); tests/test_cli_startup.py checks they agree.
_COMMANDS: dict[str, tuple[str, str]] = {
    "zone": ("cloudzones.cli.zone", "show a node's region, zone and the labels cloudzones would apply"),
    "volume-zone": ("cloudzones.cli.volume_zone", "show the zone a claim's disk would get, and the rule that decided"),
    "plan": ("cloudzones.cli.plan",
             "check workload spread (Loki, FoundationDB, Longhorn) and zone-outage impact offline"),
    "report": ("cloudzones.cli.report", "see the cluster's zones: capacity, spread, and what losing each zone does"),
    "controller": ("cloudzones.cli.controller", "run the node labeller (Deployment mode)"),
    "node-agent": ("cloudzones.cli.node_agent", "label this node from its own IMDS (DaemonSet mode)"),
    "provisioner": ("cloudzones.cli.provisioner", "run the zoned-disk provisioner (Deployment mode)"),
    "webhook": ("cloudzones.cli.webhook", "serve the PersistentVolume label admission webhook"),
    "lb": ("cloudzones.cli.lb", "plan (and apply) a zone-redundant Standard load balancer and public IP"),
    "simulate": ("cloudzones.cli.simulate",
                 "run every component against an emulated Azure and Kubernetes, then check invariants"),
}
_COMMAND_MODULES: tuple[str, ...] = tuple(module for module, _ in _COMMANDS.values())
_GLOBAL_VALUED = ("--log-level", "--log-format")

log = logging.getLogger("cloudzones.cli")


def _add_log_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    # Accepted before and after the subcommand; after it they have no default, so they only
    # override the global value when given there.
    parser.add_argument("--log-level", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        default="WARNING" if defaults else argparse.SUPPRESS,
                        help="log verbosity on stderr (default WARNING)")
    parser.add_argument("--log-format", choices=["text", "json"], default="text" if defaults else argparse.SUPPRESS,
                        help="log line format (default text)")


EXIT_CODES = "exit codes: 0 ok, 1 failure or error finding (one line on stderr), 2 usage error"


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: it takes the global log options too (nested subcommands inherit the class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_CODES)
        super().__init__(*args, **kwargs)
        _add_log_options(self, defaults=False)


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (after any global options), or None (``--help``, a typo, nothing)."""
    tokens = iter(argv)
    for token in tokens:
        if token in _GLOBAL_VALUED:
            next(tokens, None)
        elif not token.startswith("-"):
            return token if token in _COMMANDS else None
        elif token in ("-h", "--help"):
            return None
    return None


def build_parser(*, only: str | None = None, lazy: bool = False) -> argparse.ArgumentParser:
    """The argument parser: every subcommand registered, or with ``lazy`` only ``only``'s module imported
    (the others are listed by name and help, enough for ``--help`` and for naming a typo)."""
    parser = argparse.ArgumentParser(
        prog="cloudzones", description="Zone-aware Kubernetes on Azure: node and volume zone labels, zoned disks, "
                                       "replica placement. Global options may also follow the command.",
        epilog=EXIT_CODES)
    _add_log_options(parser, defaults=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                       parser_class=_CommandParser)
    for name, (module, text) in _COMMANDS.items():
        if not lazy or name == only:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=chosen_command(arguments), lazy=True)
    args = parser.parse_args(arguments)
    from cloudzones.services import logs

    logs.configure(level=args.log_level, fmt=args.log_format)
    try:
        code: int = args.handler(args)
    except errors.UsageError as exc:
        from cloudzones.cli import output

        output.error(args.command, exc)
        return 2
    except errors.CloudZonesError as exc:
        from cloudzones.cli import output

        log.debug("command failed", exc_info=True)
        output.error(args.command, exc)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
