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

# Each module defines ``register(subparsers)``; the order is the order of ``--help``.
_COMMAND_MODULES: tuple[str, ...] = (
    "cloudzones.cli.zone",
    "cloudzones.cli.volume_zone",
    "cloudzones.cli.plan",
    "cloudzones.cli.controller",
    "cloudzones.cli.node_agent",
    "cloudzones.cli.provisioner",
    "cloudzones.cli.webhook",
    "cloudzones.cli.lb",
    "cloudzones.cli.simulate",
)

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


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="cloudzones", description="Zone-aware Kubernetes on Azure: node and volume zone labels, zoned disks, "
                                       "replica placement. Global options may also follow the command.",
        epilog=EXIT_CODES)
    _add_log_options(parser, defaults=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                       parser_class=_CommandParser)
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from cloudzones.services import logs

    logs.configure(level=args.log_level, fmt=args.log_format)
    try:
        code: int = args.handler(args)
    except errors.UsageError as exc:
        print(f"cloudzones {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except errors.CloudZonesError as exc:
        log.debug("command failed", exc_info=True)
        print(f"cloudzones {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
