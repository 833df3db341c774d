"""``cloudzones simulate``: the whole pipeline on an emulated cloud and cluster; exit 0 when every check holds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cloudzones import errors
from cloudzones.cli import output
from cloudzones.cli.output import summary


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "simulate", help="run every component against an emulated Azure and Kubernetes, then check invariants",
        description=summary(__doc__))
    parser.add_argument("scenario", nargs="?", help="scenario YAML (default: the bundled three-zone scenario)")
    parser.add_argument("--control-plane", action="store_true",
                        help="use a real etcd + kube-apiserver on loopback instead of the embedded fake API server "
                             "(binaries from 'scripts/control-plane build')")
    output.add_output_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the scenario; 0 when every check holds, 1 otherwise."""
    from cloudzones.simulation import pipeline, report, scenario, world
    from cloudzones.testing import controlplane

    loaded = scenario.load(args.scenario)
    if args.control_plane and controlplane.find_binaries() is None:
        raise errors.ConfigError("--control-plane needs the control-plane binaries: run 'scripts/control-plane build' "
                                 "(needs Go), or set CLOUDZONES_CONTROL_PLANE to a folder holding etcd and "
                                 "kube-apiserver")
    tty = sys.stderr.isatty()

    def progress(message: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K{message}")
            sys.stderr.flush()

    with world.running(loaded, control_plane=args.control_plane) as sim:
        result = pipeline.run_all(sim, progress)
        node_labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in sim.api.list("nodes")}
    if tty:
        sys.stderr.write("\r\033[K")
    found = report.checks(result, node_labels)
    result["checks"] = found
    output.emit(result, args.output, text=report.tables(result, found))
    return 0 if all(c["ok"] for c in found) else 1
