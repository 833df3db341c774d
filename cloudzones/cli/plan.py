"""``cloudzones plan``: check workload spread before deploying, and what losing a zone would do.

``replication`` (Loki zone-aware replication), ``coordinators`` (FoundationDB coordinators),
``locality`` (Longhorn data locality) read an input manifest and optional nodes and print the plan
and its findings; ``outage --zone Z`` reads a cluster snapshot. Everything is offline: files in,
data on stdout. Exit 1 when a finding is an error, 2 on misuse.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from cloudzones import documents, errors, shapes, topology
from cloudzones.cli import output, report
from cloudzones.cli.output import summary
from cloudzones.workloads import coordinators, findings, locality, outage, replication, zoneinject

_FINDING_COLUMNS = ["severity", "rule", "subject", "message"]


def register(subparsers: Any) -> None:
    """Add ``plan`` and its four subcommands."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plan", help="check workload spread (Loki, FoundationDB, Longhorn) and zone-outage impact offline",
        description=summary(__doc__))
    commands = parser.add_subparsers(dest="plan_command", metavar="WHAT", required=True)
    specs: tuple[tuple[str, str, Callable[[argparse.Namespace], int]], ...] = (
        ("replication", "Loki zone-aware replication: validate a LokiStack against the nodes and place it",
         _replication),
        ("coordinators", "FoundationDB: resolve localities and choose the coordinators", _coordinators),
        ("locality", "Longhorn data locality: each volume's mode and next reconcile step", _locality),
        ("outage", "what losing one zone does: quorum, PVs pinned to it, FoundationDB coordinators", _outage))
    for name, text, handler in specs:
        sub = commands.add_parser(name, help=text, description=text)
        if name == "outage":
            # The live cluster when -f is left out, as `cloudzones report` reads it.
            report.add_source_options(sub, what="SNAPSHOT.yaml")
        elif name in _LIVE_KINDS:
            sub.add_argument("-f", "--file", type=pathlib.Path, metavar="INPUT.yaml",
                             help=f"the input (see README: cloudzones plan); without it, the {_LIVE_KINDS[name]} "
                                  "--name in -n is read from the cluster with every node")
            sub.add_argument("--name", help=f"the {_LIVE_KINDS[name]} to read from the cluster (without -f)")
            _add_cluster_options(sub, namespace="default")
        elif name == "locality":
            sub.add_argument("-f", "--file", type=pathlib.Path, metavar="INPUT.yaml",
                             help="the input (see README: cloudzones plan); without it, Longhorn's volumes, "
                                  "replicas, nodes and settings in -n are read from the cluster")
            sub.add_argument("--storage-class", metavar="NAME", help="the StorageClass to read with them (without -f)")
            _add_cluster_options(sub, namespace="longhorn-system")
        else:
            sub.add_argument("-f", "--file", required=True, type=pathlib.Path, metavar="INPUT.yaml",
                             help="the input (see README: cloudzones plan)")
        if name == "outage":
            sub.add_argument("--zone", required=True, help="the zone to lose (a node zone label value)")
            sub.add_argument("--zone-key", default="topology.kubernetes.io/zone", type=report.label_key,
                             help="the node label holding the zone (default topology.kubernetes.io/zone)")
        else:
            sub.add_argument("--nodes", type=pathlib.Path, metavar="NODES.yaml",
                             help="the cluster's Node manifests (a List, a YAML list or several documents)")
        if name == "replication":
            sub.add_argument("--zone-injection", action="store_true",
                             help="also print the pod-template pieces that hand each pod its zone")
            sub.add_argument("--init-image", default=zoneinject.DEFAULT_IMAGE,
                             help=f"image of the waiting init container (default {zoneinject.DEFAULT_IMAGE})")
        if name == "coordinators":
            sub.add_argument("--no-hard-limits", action="store_true",
                             help="what-if: let zones hold several coordinators (FoundationDB never does)")
        output.add_output_option(sub)
        sub.set_defaults(handler=handler)


_LIVE_KINDS = {"replication": "LokiStack", "coordinators": "FoundationDBCluster"}


def _add_cluster_options(parser: argparse.ArgumentParser, *, namespace: str) -> None:
    parser.add_argument("-n", "--namespace", default=namespace, help=f"the namespace to read (default {namespace})")
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default as kubectl finds it)")
    parser.add_argument("--context", help="kubeconfig context")


def _live_or_file(args: argparse.Namespace, kind: str) -> list[Mapping[str, Any]]:
    """The documents of ``-f``, or the named object and every node read from the cluster."""
    if args.file is not None:
        if args.name or args.kubeconfig or args.context:
            raise errors.UsageError("-f reads a file: --name, --kubeconfig and --context apply to the cluster only")
        return _documents(args.file)
    if not args.name:
        raise errors.UsageError(f"say which {kind} to read from the cluster with --name (or give -f FILE)")
    from cloudzones import kube
    from cloudzones.kube import snapshot

    with kube.KubeClient.from_environment(kubeconfig=args.kubeconfig, context=args.context) as client:
        found, nodes = snapshot.read_workload(client, kind, args.name, args.namespace)
    return [found, *nodes]


def _replication(args: argparse.Namespace) -> int:
    documents = _live_or_file(args, "LokiStack")
    nodes, rest = _split_nodes(documents)
    stacks = [d for d in rest if d.get("kind") in (None, "LokiStack")]
    if len(stacks) != 1:
        raise errors.ConfigError(f"{args.file or 'the input'} must hold exactly one LokiStack, found {len(stacks)}")
    nodes += _nodes_file(args.nodes)
    return _run(lambda: replication.plan(stacks[0], nodes, zone_injection=args.zone_injection,
                                         image=args.init_image), args.output, _replication_text)


def _coordinators(args: argparse.Namespace) -> int:
    documents = _live_or_file(args, "FoundationDBCluster")
    nodes, rest = _split_nodes(documents)
    clusters = [d for d in rest if d.get("kind") in (None, "FoundationDBCluster")]
    if len(clusters) != 1:
        raise errors.ConfigError(f"{args.file or 'the input'} must hold exactly one FoundationDBCluster, "
                                 f"found {len(clusters)}")
    nodes += _nodes_file(args.nodes)
    return _run(lambda: coordinators.plan(clusters[0], nodes, enforce_hard_limits=not args.no_hard_limits),
                args.output, _coordinators_text)


def _locality(args: argparse.Namespace) -> int:
    if args.file is None:
        if args.nodes is not None:
            raise errors.UsageError("--nodes goes with -f; without -f the cluster's nodes are read")
        from cloudzones import kube
        from cloudzones.kube import snapshot

        with kube.KubeClient.from_environment(kubeconfig=args.kubeconfig, context=args.context) as client:
            live = snapshot.read_longhorn(client, namespace=args.namespace, storage_class=args.storage_class)
        return _run(lambda: locality.plan(live["volumes"], live["replicas"], live["nodes"],
                                          storage_class=live["storageClass"], settings=live["settings"],
                                          kube_nodes=live["kubeNodes"]), args.output, _locality_text)
    if args.storage_class or args.kubeconfig or args.context:
        raise errors.UsageError("-f reads a file: --storage-class, --kubeconfig and --context apply to the cluster")
    parts: dict[str, Any] = {"volumes": [], "replicas": [], "nodes": [], "storageClass": None, "settings": {}}
    for doc in _documents(args.file):
        kind = doc.get("kind")
        if kind is None:
            try:
                shapes.check(doc, shapes.LONGHORN_INPUT)
            except shapes.ShapeError as exc:
                raise documents.InputError(f"{args.file}: {exc}") from None
            for key in ("volumes", "replicas", "nodes"):
                parts[key] += list(doc.get(key) or [])
            parts["storageClass"] = doc.get("storageClass") or parts["storageClass"]
            parts["settings"].update(doc.get("settings") or {})
        elif kind in ("Volume", "Replica", "Node") and str(doc.get("apiVersion", "")).startswith("longhorn.io"):
            parts[kind.lower() + "s"].append(doc)
        elif kind == "StorageClass":
            parts["storageClass"] = doc
        elif kind == "Setting":
            parts["settings"].update(locality.settings_of([doc]))
        else:
            raise errors.ConfigError(f"{args.file}: unexpected {kind} (apiVersion {doc.get('apiVersion')!r})")
    kube_nodes = _nodes_file(args.nodes)
    return _run(lambda: locality.plan(parts["volumes"], parts["replicas"], parts["nodes"],
                                      storage_class=parts["storageClass"], settings=parts["settings"],
                                      kube_nodes=kube_nodes), args.output, _locality_text)


def _outage(args: argparse.Namespace) -> int:
    def build() -> outage.OutageReport:
        return outage.report(report.load_snapshot(args), args.zone, zone_key=args.zone_key)

    return _run(build, args.output, _outage_text)


def _run(build: Callable[[], Any], fmt: str, text: Callable[[Any], str]) -> int:
    """Build the plan and print it; findings that are errors (or a malformed input) give exit 1."""
    try:
        result = build()
    except errors.InvalidWorkloadSpec as exc:
        data = {"findings": findings.as_dicts(exc.findings), "ok": False}
        output.emit(data, fmt, text=_findings_text(exc.findings))
        output.error("plan", exc)
        return 1
    output.emit(result.as_dict(), fmt, text=text(result))
    if not result.ok:
        print(f"cloudzones plan: {len(findings.errors_in(result.findings))} error finding(s)", file=sys.stderr)
        return 1
    return 0


def _findings_text(items: Sequence[findings.Finding]) -> str:
    return "\nFINDINGS\n" + output.table([i.as_dict() for i in items], _FINDING_COLUMNS) if items else ""


def _replication_text(result: replication.ReplicationPlan) -> str:
    keys = ", ".join(result.topology_keys) or "no topology key"
    lines = [f"LokiStack {result.name}: replication factor {result.factor}, {len(result.zones)} zone(s) "
             f"{list(result.zones)} by {keys}"]
    if result.tolerance:
        lines.append(f"tolerated zone failures: writes {result.tolerance.write_zone_failures}, "
                     f"reads {result.tolerance.read_zone_failures}")
    rows = [{"component": c.name, "replicas": c.replicas, "nodes": c.nodes, "zones": c.zones,
             "stuck": c.stuck} for c in result.components]
    text = "\n".join(lines) + "\n\n" + output.table(rows, ["component", "replicas", "nodes", "zones", "stuck"])
    if result.zone_injection:
        text += "\nZONE INJECTION (merge into each non-gateway pod template)\n"
        text += yaml.safe_dump(result.zone_injection.as_dict(), sort_keys=False, default_flow_style=False)
    return text + _findings_text(result.findings)


def _coordinators_text(result: coordinators.CoordinatorPlan) -> str:
    limits = ",".join(f"{k}={v}" for k, v in result.hard_limits.items())
    if not result.hard_limits_enforced:
        limits = f"off (what-if; FoundationDB enforces {limits})"
    head = (f"FoundationDBCluster {result.name}: {result.redundancy_mode}, usable_regions {result.usable_regions}, "
            f"{len(result.coordinators)} of {result.desired} coordinator(s), hard limits {limits}\n\n")
    rows = [{"id": c.id, "class": c.process_class, "node": c.node or "-", "localities": dict(c.localities)}
            for c in result.coordinators]
    return head + output.table(rows, ["id", "class", "node", "localities"]) + _findings_text(result.findings)


def _locality_text(result: locality.LocalityPlan) -> str:
    rows = [{"volume": v.volume, "mode": v.mode or "-", "source": v.mode_source or "-",
             "engine": v.engine_node or "-", "action": v.action, "target": v.remove or
             (f"{v.node}/{v.disk}" if v.node else "-"), "then-remove": v.then_remove or "-"} for v in result.volumes]
    text = output.table(rows, ["volume", "mode", "source", "engine", "action", "target", "then-remove"])
    text += "".join(f"{v.volume}: {v.reason}\n" for v in result.volumes)
    return text + _findings_text(result.findings)


def _outage_text(result: outage.OutageReport) -> str:
    text = (f"losing {topology.noun(result.zone)} {result.zone}: {len(result.nodes_lost)} node(s) "
            f"{list(result.nodes_lost)}, {len(result.pods_lost)} pod(s)\n\nWORKLOADS\n")
    text += output.table([w.as_dict() for w in result.workloads],
                         ["workload", "pods", "lost", "quorum", "survivors", "status"])
    text += "\nUNSCHEDULABLE PODS\n" + output.table([p.as_dict() for p in result.unschedulable],
                                                    ["pod", "claims", "volumes"])
    text += "\nFOUNDATIONDB COORDINATORS\n" + output.table(
        [c.as_dict() for c in result.coordinators], ["cluster", "coordinators", "lost", "quorum", "survives"])
    return text + _findings_text(result.findings)


def _documents(path: pathlib.Path) -> list[Mapping[str, Any]]:
    """The YAML documents of ``path``, ``List`` items flattened (a snapshot mapping is kept whole)."""
    return list(documents.manifests(path, what="input"))


def _split_nodes(documents: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    nodes = [d for d in documents if d.get("kind") == "Node"]
    return nodes, [d for d in documents if d.get("kind") != "Node"]


def _nodes_file(path: pathlib.Path | None) -> list[Mapping[str, Any]]:
    if path is None:
        return []
    nodes = _documents(path)
    for node in nodes:
        if node.get("kind", "Node") != "Node":
            raise errors.ConfigError(f"{path}: expected Node manifests, found a {node.get('kind')}")
    return nodes
