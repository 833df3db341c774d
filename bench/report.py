"""Benchmark: `cloudzones report` on a 5,000-node, 150,000-pod snapshot vs parsing the snapshot alone.

The snapshot (one JSON ``List``, as ``kubectl get -o json`` gives it, written once to a temporary file): 5,000
nodes in 3 zones with allocatable CPU and memory; 150,000 running pods with requests, in 1,500
Deployments' ReplicaSets of 90 pods and 300 StatefulSets of 50 with one zonal claim each (so
15,000 claims and PVs pinned to their zone). Timed: the whole command in a fresh process (``-o
json`` to /dev/null: reading, the report with every zone's what-if, the JSON out), against a fresh
process that only parses the file (whole, with orjson), and beside it a fresh process that only reads it
the report's way (item by item with msgspec, pods compacted: `compact.SnapshotItems`). Peak memory:
the command's maximum resident set.

Goal: report <= 10 s and <= 500 MB on 2 cores. (The 64 MiB input cap is raised for the run with
``CLOUDZONES_MAX_INPUT_MIB``: this snapshot is ~70 MB.)

Run:  PYTHONPATH=. python bench/report.py [--nodes 5000] [--pods 150000]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ZONES = ("eastus-1", "eastus-2", "eastus-3")


def snapshot(nodes: int, pods: int) -> dict[str, list[dict[str, Any]]]:
    """The scenario as a snapshot mapping."""
    node_names = [f"aks-pool-{i:05d}" for i in range(nodes)]
    zone_of = {name: ZONES[i % 3] for i, name in enumerate(node_names)}
    out: dict[str, list[dict[str, Any]]] = {"nodes": [], "pods": [], "persistentVolumeClaims": [],
                                            "persistentVolumes": [], "statefulSets": [], "foundationDBClusters": []}
    for name in node_names:
        out["nodes"].append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "topology.kubernetes.io/zone": zone_of[name], "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "3860m", "memory": "13Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})
    stateful = pods // 10
    for i in range(pods):
        node = node_names[(i * 7919) % nodes]
        if i < stateful:
            owner, kind, set_name = f"db-{i // 50}", "StatefulSet", f"db-{i // 50}"
            name = f"{set_name}-{i % 50}"
        else:
            owner, kind, name = f"web-{i // 90}-5d8f7", "ReplicaSet", f"web-{i // 90}-5d8f7-{i % 90}"
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "shop", "labels": {"app": owner},
            "ownerReferences": [{"kind": kind, "name": owner, "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "app", "resources": {"requests": {
                "cpu": "100m", "memory": "256Mi"}}}]},
            "status": {"phase": "Running", "podIP": f"10.{i >> 16}.{i >> 8 & 255}.{i & 255}"}}
        if kind == "StatefulSet":
            claim = f"data-{name}"
            pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
            out["persistentVolumeClaims"].append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
                "name": claim, "namespace": "shop"}, "spec": {"volumeName": f"pv-{claim}"}})
            out["persistentVolumes"].append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {
                "name": f"pv-{claim}"}, "spec": {"claimRef": {"namespace": "shop", "name": claim}, "nodeAffinity": {
                    "required": {"nodeSelectorTerms": [{"matchExpressions": [{
                        "key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone_of[node]]}]}]}}}})
        out["pods"].append(pod)
    for s in range(stateful // 50):
        out["statefulSets"].append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {
            "name": f"db-{s}", "namespace": "shop"}, "spec": {"replicas": 50}})
    return out


def fresh(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of one fresh process (measured by /usr/bin/time's own child)."""
    started = time.perf_counter()
    answer = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, *argv], capture_output=True, text=True,  # noqa: S603
                            check=False, env={**os.environ, "CLOUDZONES_MAX_INPUT_MIB": "512"})
    seconds = time.perf_counter() - started
    *log, peak = answer.stderr.strip().splitlines() or ["0"]
    if answer.returncode not in (0, 1) or any("Traceback" in line or ": error:" in line for line in log):
        raise SystemExit(f"{argv}: exit {answer.returncode}: {answer.stderr[-2000:]}")
    return seconds, int(peak) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    args = parser.parse_args()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="cloudzones-report-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # the snapshot is ~70 MB
    path = folder / "snapshot.json"
    snap = snapshot(args.nodes, args.pods)
    # What `kubectl get nodes,pods,pvc,pv,statefulsets -A -o json` writes: one List of every object.
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                "items": [item for key in snap for item in snap[key]]}))
    del snap
    size = path.stat().st_size / 2**20
    parse_s, parse_mb = fresh(["-c", f"from cloudzones import documents; documents.load_one({str(path)!r})"])
    read_s, read_mb = fresh(["-c", "from cloudzones import documents; from cloudzones.workloads import compact; "
                             f"documents.load_streamed({str(path)!r}, each=compact.SnapshotItems(), "
                             "check_depth=False)"])
    report_s, report_mb = fresh(["-m", "cloudzones.cli", "report", "-f", str(path), "-o", "json"])
    print(f"snapshot: {args.nodes} nodes, {args.pods} pods, {size:.0f} MB of JSON")
    print(f"parse alone: {parse_s:.2f} s, peak {parse_mb:.0f} MB (the whole file at once, as load_one reads it)")
    print(f"the report's own read alone: {read_s:.2f} s, peak {read_mb:.0f} MB (item by item, pods compacted)")
    print(f"cloudzones report -o json: {report_s:.2f} s (goal <= 10 s; {report_s / parse_s:.1f}x the parse), "
          f"peak {report_mb:.0f} MB (goal <= 500 MB)")


if __name__ == "__main__":
    main()
