"""``cloudzones volume-zone``: which zone a claim's disk would get under a StorageClass, and which rule decided.

Reads manifests only (no cluster, no cloud): the StorageClass, the claim, and optionally the
nodes (whose zone labels are the active zones) and the node the scheduler selected.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import storageclass
from cloudzones import documents, errors
from cloudzones.cli import output
from cloudzones.cli.output import summary
from storageclass import zonelabel

log = logging.getLogger("cloudzones.cli.volume_zone")

#: Annotations the scheduler sets on a WaitForFirstConsumer claim (the alpha one on old clusters).
SELECTED_NODE_ANNOTATIONS = ("volume.kubernetes.io/selected-node", "volume.alpha.kubernetes.io/selected-node")


def register(subparsers: Any) -> None:
    """Add the ``volume-zone`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "volume-zone", help="show the zone a claim's disk would get, and the rule that decided",
        description=summary(__doc__))
    parser.add_argument("--storage-class", required=True, type=pathlib.Path, metavar="SC.yaml",
                        help="the StorageClass manifest")
    parser.add_argument("--pvc", required=True, type=pathlib.Path, metavar="PVC.yaml",
                        help="the PersistentVolumeClaim manifest")
    parser.add_argument("--nodes", type=pathlib.Path, metavar="NODES.yaml",
                        help="the cluster's nodes: a List manifest or a list of Node manifests")
    parser.add_argument("--selected-node", metavar="NAME",
                        help="the node the scheduler picked (default: the claim's selected-node annotation)")
    parser.add_argument("--region", help="the cluster's region (default: the nodes' region label, if they agree)")
    parser.add_argument("--mode", choices=storageclass.MODES, default="balanced",
                        help="round-robin mode (default balanced; kubernetes = exactly kube's ChooseZonesForVolume)")
    parser.add_argument("--statefulset", metavar="NAME",
                        help="the claim's StatefulSet (default: the claim's StatefulSet owner reference)")
    parser.add_argument("--zones-needed", dest="zones_needed", type=int, default=1, metavar="N",
                        help="zones the volume spans, for multi-zone disks (default 1)")
    # The name before 0.2, which read like pod replicas.
    parser.add_argument("--replicas", dest="zones_needed", type=int, help=argparse.SUPPRESS)
    output.add_output_option(parser)
    parser.set_defaults(handler=handler)


def handler(args: argparse.Namespace) -> int:
    """Run the command; 0 when a zone (or no zone, by rule) was chosen, 1 when a rule failed, 2 on misuse."""
    storage_class = _load_one(args.storage_class, "StorageClass")
    pvc = _load_one(args.pvc, "PersistentVolumeClaim")
    nodes = _load_nodes(args.nodes) if args.nodes else []
    pvc_meta = pvc.get("metadata") or {}
    pvc_name = str(pvc_meta.get("name") or "")
    if not pvc_name:
        raise errors.ConfigError(f"{args.pvc}: the claim has no metadata.name")
    region = args.region or _common_region(nodes)
    selected_name = args.selected_node or _selected_node_annotation(pvc_meta)
    statefulset = args.statefulset or _owner_statefulset(pvc_meta)
    if selected_name and not args.nodes:
        print(f"cloudzones volume-zone: error: the selected node {selected_name!r} needs --nodes, where its "
              f"labels are read", file=sys.stderr)
        return 2
    record: dict[str, Any] = {
        "pvc": pvc_name, "storageClass": (storage_class.get("metadata") or {}).get("name", ""),
        "region": region, "selectedNode": selected_name, "statefulset": statefulset, "mode": args.mode,
    }
    wanted = pvc.get("spec", {}).get("storageClassName")
    if wanted and record["storageClass"] and wanted != record["storageClass"]:
        log.warning("claim %s asks for StorageClass %s, not %s", pvc_name, wanted, record["storageClass"])
    try:
        spec = storageclass.StorageClassSpec.from_manifest(storage_class, region=region)
        selected_node = _find_node(nodes, selected_name, args.nodes) if selected_name else None
        choice = storageclass.explain_zones(
            spec, pvc_name=pvc_name, active_zones=[zonelabel.node_zone(node)[1] for node in nodes],
            selected_node=selected_node, replicas=args.zones_needed, mode=args.mode, statefulset=statefulset)
    except (errors.InvalidStorageClass, errors.NoZonedNodes) as exc:
        record.update(ok=False, rule=exc.rule, error=str(exc), zones=[])
        _emit(record, args.output)
        output.error("volume-zone", exc)
        return 1
    record.update(ok=True, **choice.as_dict())
    _emit(record, args.output)
    return 0


def _emit(record: Mapping[str, Any], fmt: str) -> None:
    columns = ["pvc", "storageClass", "zones", "rule"]
    row = {**record, "rule": record.get("rule") or "-"}
    if not record["ok"]:
        row["zones"] = "(failed)"
    text = output.table([row], columns)
    if record["ok"]:
        text += f"reason: {record['reason']}\n"
    output.emit(dict(record), fmt, text=text)


def _load_one(path: pathlib.Path, kind: str) -> dict[str, Any]:
    found = documents.manifests(path, what=kind, kind=kind)
    if len(found) != 1:
        raise documents.InputError(f"{kind} {path}: expected exactly one {kind} manifest, found {len(found)}")
    return found[0]


def _load_nodes(path: pathlib.Path) -> list[dict[str, Any]]:
    """Nodes from a List / NodeList manifest, a YAML list of Node manifests, or several documents."""
    return documents.manifests(path, what="nodes file", kind="Node")


def _common_region(nodes: Sequence[Mapping[str, Any]]) -> str | None:
    regions = {zonelabel.node_region(node) for node in nodes} - {""}
    return regions.pop() if len(regions) == 1 else None


def _selected_node_annotation(metadata: Mapping[str, Any]) -> str | None:
    annotations = metadata.get("annotations") or {}
    return next((str(annotations[key]) for key in SELECTED_NODE_ANNOTATIONS if annotations.get(key)), None)


def _owner_statefulset(metadata: Mapping[str, Any]) -> str | None:
    for owner in metadata.get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("kind") == "StatefulSet" and owner.get("name"):
            return str(owner["name"])
    return None


def _find_node(nodes: Sequence[Mapping[str, Any]], name: str, path: pathlib.Path) -> Mapping[str, Any]:
    for node in nodes:
        if zonelabel.node_name(node) == name:
            return node
    raise errors.ConfigError(f"the selected node {name!r} is not among the {len(nodes)} node(s) in {path}")
