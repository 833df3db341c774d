"""``cloudzones report``: the cluster's zones at a glance: capacity, workloads' spread, what losing each zone does.

From a snapshot file (``-f``, what ``cloudzones plan outage`` reads) or, without ``-f``, from the live
cluster through the usual kubeconfig resolution (``--kubeconfig``, ``$KUBECONFIG``, in-cluster),
read-only. Tables on stdout (``-o json|yaml`` for data); ``--html FILE`` also writes one
self-contained page with a picture of the zones. Exit 0 when no finding is an error, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gc
import pathlib
import sys
from typing import Any

from cloudzones import documents, errors, labels
from cloudzones.cli import output
from cloudzones.cli.output import summary

HELP = "see the cluster's zones: capacity, spread, and what losing each zone does"


def register(subparsers: Any) -> None:
    """Add the ``report`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser("report", help=HELP, description=summary(__doc__))
    add_source_options(parser, what="SNAPSHOT.yaml")
    parser.add_argument("--zone-key", default="topology.kubernetes.io/zone", type=label_key,
                        help="the node label holding the zone (default topology.kubernetes.io/zone)")
    parser.add_argument("--html", type=pathlib.Path, metavar="FILE", help="also write a self-contained HTML page")
    output.add_output_option(parser)
    parser.set_defaults(handler=run)


def label_key(value: str) -> str:
    """A label key (``--zone-key``): one that no node could carry would report every node as zone-less."""
    if not labels.is_label_key(value):
        raise argparse.ArgumentTypeError(f"{value!r:.80} is not a label key (like topology.kubernetes.io/zone)")
    return value


def add_source_options(parser: argparse.ArgumentParser, *, what: str, required: bool = False) -> None:
    """``-f FILE``, or the live cluster: ``--kubeconfig``, ``--context``, ``-n``, ``-A`` (as kubectl spells them)."""
    parser.add_argument("-f", "--file", type=pathlib.Path, metavar=what, required=required,
                        help="read this snapshot instead of the live cluster")
    parser.add_argument("--kubeconfig", metavar="PATH",
                        help="kubeconfig file (default: in-cluster inside a pod, else $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="read pods, claims and StatefulSets of this namespace only")
    scope.add_argument("-A", "--all-namespaces", action="store_true",
                       help="read every namespace (the default; nodes and volumes are always cluster-wide)")


def load_snapshot(args: argparse.Namespace) -> dict[str, list[Any]]:
    """The snapshot from ``-f``, or read from the cluster (notes on skipped resources go to stderr)."""
    from cloudzones.workloads import outage

    if args.file is not None:
        if args.namespace or args.kubeconfig or args.context:
            raise errors.UsageError("-f reads a file: --kubeconfig, --context and -n apply to the live cluster only")
        from cloudzones.workloads import compact

        # Item by item, pods compacted as they are parsed: the whole file never exists as Python objects.
        items = documents.load_streamed(args.file, what="snapshot", each=compact.SnapshotItems(), check_depth=False)
        return outage.snapshot_from_documents(items, checked=True)
    from cloudzones import kube
    from cloudzones.kube import snapshot

    with kube.KubeClient.from_environment(kubeconfig=args.kubeconfig, context=args.context) as client:
        found, notes = snapshot.read(client, namespace=args.namespace)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return dict(found)


def run(args: argparse.Namespace) -> int:
    """Build the report, print it, write the page; exit 1 on an error finding."""
    from cloudzones.cli import report_html
    from cloudzones.workloads import zonereport

    # A 150,000-pod snapshot is millions of objects and no cycles: the cyclic collector would rescan
    # them again and again while the report allocates (the process ends right after).
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = zonereport.build(load_snapshot(args), zone_key=args.zone_key)
    finally:
        if enabled:
            gc.enable()
    output.emit(result.as_dict(), args.output, text=text(result))
    if args.html is not None:
        try:
            args.html.write_text(report_html.render(result), encoding="utf-8")
        except OSError as exc:
            raise errors.ConfigError(f"cannot write {args.html}: {exc.strerror or exc}") from None
    if not result.ok:
        errors_found = sum(1 for f in result.findings if f.severity.value == "error")
        print(f"cloudzones report: {errors_found} error finding(s)", file=sys.stderr)
        return 1
    return 0


def text(result: Any) -> str:
    """The terminal form: zones, workloads by zone (pods and zone-loss verdict), findings."""
    from cloudzones.workloads import zonereport

    zones = [z.zone for z in result.zones]
    names = {z: zonereport.column_name(z) for z in zones}  # a fault domain is said to be one, never a zone
    rows = [{"zone": names[z.zone], "nodes": f"{z.ready}/{z.nodes}", "cpu": f"{z.cpu_requested}m/{z.cpu_allocatable}m",
             "memory": f"{_mib(z.memory_requested)}/{_mib(z.memory_allocatable)}", "pods": z.pods,
             "pinned-pvs": len(z.volumes)} for z in result.zones]
    out = "ZONES (ready/nodes, requested/allocatable)\n" + output.table(
        rows, ["zone", "nodes", "cpu", "memory", "pods", "pinned-pvs"])
    workloads = [{"workload": w.workload, "skew": w.skew,
                  **{names[z]: f"{w.pods.get(z, 0)} {w.loss[z]}" if z in w.loss else str(w.pods.get(z, 0))
                     for z in zones}}
                 for w in result.workloads]
    out += "\nWORKLOADS (pods in the zone, and what losing it does)\n" + output.table(
        workloads, ["workload", "skew", *names.values()])
    if result.findings:
        out += "\nFINDINGS\n" + output.table([f.as_dict() for f in result.findings],
                                             ["severity", "rule", "subject", "message"])
    return out


def _mib(value: int) -> str:
    return f"{value / 2**30:.1f}Gi" if value >= 2**30 else f"{value // 2**20}Mi"
