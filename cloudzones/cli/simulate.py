"""``cloudzones simulate``: the whole pipeline on an emulated cloud and cluster; exit 0 when every check holds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cloudzones.cli import output
from cloudzones.cli.output import summary


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "simulate", help="run every component against an emulated Azure and Kubernetes, then check invariants",
        description=summary(__doc__))
    parser.add_argument("scenario", nargs="?", help="scenario YAML (default: the bundled three-zone scenario)")
    output.add_output_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the scenario; 0 when every check holds, 1 otherwise."""
    from cloudzones.simulation import pipeline, report, scenario, world

    loaded = scenario.load(args.scenario)
    tty = sys.stderr.isatty()

    def progress(message: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K{message}")
            sys.stderr.flush()

    with world.running(loaded) as sim:
        result = pipeline.run_all(sim, progress)
        node_labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in sim.api.list("nodes")}
    if tty:
        sys.stderr.write("\r\033[K")
    found = report.checks(result, node_labels)
    result["checks"] = found
    output.emit(result, args.output, text=report.tables(result, found))
    return 0 if all(c["ok"] for c in found) else 1
