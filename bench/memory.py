"""Benchmark: the node controller's resident memory with 5,000 AKS-sized nodes cached, vs keeping whole nodes.

The fake API server (5,000 nodes of ~6.7 KB of JSON: labels, annotations, conditions, addresses,
nodeInfo, 20 images; `bench/labelling.py`'s scenario) and the fake ARM run in one child process;
each measurement runs in a fresh spawned process of its own, so that no figure carries another's
heap. In each, RSS (``VmRSS``) is read after the imports, the client and (for the controller) the
Azure provider are ready, then again once the work is done and the garbage collected; the peak
(``VmHWM``) is reset first where the kernel allows it.

* controller: the real `NodeLabeler` (informer, queue, 4 workers, `AzureProvider` and its ARM
  cache) until all 5,000 nodes carry their labels;
* informer with the labeller's projection (`nodelabels.project`) alone, and an informer keeping
  whole node dicts (the baseline: what a cache of full objects costs);
* tracemalloc of those two caches (bytes held by a synced informer, `bench/kube_informer.py`'s
  method).

Goal: controller RSS <= 150 MB.

Run:  PYTHONPATH=. python bench/memory.py [--nodes 5000] [--scale-sets 10]
"""

from __future__ import annotations

import argparse
import atexit
import functools
import gc
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench import labelling
from bench.kube_informer import retained_bytes
from bench.remote_api import RemoteKubeApi
from cloudzones import kube, nodelabels
from cloudzones.kube import informer
from cloudzones.services import controller
from cloudzones.testing.kubeapi import FakeKubeApi
from cloudzones.testing.tls import TlsFiles, make_tls_files

MB = 1024 * 1024


def status_kb(field: str) -> int:
    """A ``VmRSS``/``VmHWM``-style line of /proc/self/status, in KiB."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: ``5`` into clear_refs); False when not allowed."""
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def settled_rss() -> int:
    """Bytes resident after a full collection."""
    gc.collect()
    return status_kb("VmRSS") * 1024


# -- run in the fake cluster's process ----------------------------------------------------------

def seed_cluster(api: FakeKubeApi, nodes: int, scale_sets: int, tls: TlsFiles) -> str:
    """The scenario's nodes in the API server, its instances in a FakeArm started here; returns the ARM URL."""
    labelling.seed_nodes(api, nodes, scale_sets, False)
    arm = labelling.fake_arm(labelling.scenario(nodes, scale_sets, small=False), scale_sets)
    return arm.start(tls=tls).url


# -- run in a fresh process per measurement -----------------------------------------------------

def _client(url: str) -> kube.KubeClient:
    client = kube.KubeClient.for_host(url)
    client.list(kube.NODES, label_selector="no-such-label=x")  # load the client's lazy parts before measuring
    return client


def measure_controller(url: str, arm_url: str, ca_file: str, nodes: int, workers: int) -> dict[str, Any]:
    """RSS of a full NodeLabeler before it starts and once every node is labelled."""
    client = _client(url)
    provider = labelling.provider_for(arm_url, ca_file)
    provider.compute()  # the Azure SDK client, built before the baseline reading
    settings = controller.ControllerSettings(workers=workers, informer=informer.InformerSettings(resync_period=0))
    labeller = controller.NodeLabeler(client, provider, settings=settings)
    before = settled_rss()
    peak_reset = reset_peak()
    start = time.perf_counter()
    labeller.start()
    deadline = start + 300
    registry = labeller.metrics.registry
    while time.perf_counter() < deadline:
        done = (registry.get_sample_value("cloudzones_node_labels_applied_total") or 0) >= nodes
        if done and len(labeller.queue) == 0:
            break
        time.sleep(0.05)
    time.sleep(1.0)  # let the echoes of our own PATCHes come back through the watch and be reconciled
    seconds = time.perf_counter() - start
    after = settled_rss()
    result = {"before": before, "after": after, "peak": status_kb("VmHWM") * 1024 if peak_reset else None,
              "cached": len(labeller.informer), "labelled": registry.get_sample_value(
                  "cloudzones_node_labels_applied_total"), "arm_calls": provider.arm_calls.total, "seconds": seconds}
    labeller.stop()
    return result


def measure_informer(url: str, whole: bool) -> dict[str, Any]:
    """RSS of a synced node informer keeping whole dicts or the labeller's projection."""
    client = _client(url)
    before = settled_rss()
    peak_reset = reset_peak()
    inf: informer.Informer[Any] = informer.Informer(
        client, kube.NODES, project=None if whole else nodelabels.project,
        settings=informer.InformerSettings(resync_period=0))
    inf.start()
    inf.wait_for_sync(300)
    after = settled_rss()
    result = {"before": before, "after": after, "peak": status_kb("VmHWM") * 1024 if peak_reset else None,
              "cached": len(inf)}
    inf.stop()
    return result


def measure_traced(url: str) -> dict[str, int]:
    """tracemalloc: bytes held by a synced informer's cache, projected and whole."""
    client = _client(url)
    return {"projected": retained_bytes(client, nodelabels.project), "whole": retained_bytes(client, None)}


CLI_IMPORTS = """
import gc, pathlib
import cloudzones.cli, cloudzones.cli.controller, providers.azure
from cloudzones import kube
client = kube.KubeClient.for_host("http://127.0.0.1:9")
provider = providers.azure.AzureProvider(providers.azure.AzureConfig.from_mapping(
    {"subscriptionId": "s", "resourceGroup": "rg"}, environ={}), credential=object())
provider.compute()
gc.collect()
print(next(line.split()[1] for line in pathlib.Path("/proc/self/status").read_text().splitlines()
           if line.startswith("VmRSS:")))
"""
"""What a ``cloudzones controller`` process holds before its first list: its imports, a client, the SDK client."""


def cli_baseline() -> int:
    """Bytes resident in a bare interpreter that loaded what ``cloudzones controller`` loads (no bench code)."""
    root = pathlib.Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", CLI_IMPORTS], capture_output=True, text=True, check=True,  # noqa: S603
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    return int(done.stdout.strip()) * 1024


def in_fresh_process(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a newly spawned interpreter; its result."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(fn, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--scale-sets", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="cloudzones-bench-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # a CA key: not left behind
    tls = make_tls_files(folder)
    seed = functools.partial(seed_cluster, nodes=args.nodes, scale_sets=args.scale_sets, tls=tls)
    with RemoteKubeApi(seed) as cluster:
        size = cluster.call(labelling.node_size, labelling.scenario(1, 1, small=False)[0][0]["metadata"]["name"])
        print(f"scenario: {args.nodes} nodes (~{size / 1000:.1f} KB of JSON each) in {args.scale_sets} scale sets; "
              "fake API server and ARM in a child process; each figure from a fresh process")
        ctl = in_fresh_process(measure_controller, cluster.url, cluster.seeded, str(tls.ca_file), args.nodes,
                               args.workers)
        projected = in_fresh_process(measure_informer, cluster.url, False)
        whole = in_fresh_process(measure_informer, cluster.url, True)
        traced = in_fresh_process(measure_traced, cluster.url)

    def line(name: str, r: dict[str, Any]) -> str:
        peak = "" if r["peak"] is None else f", peak {r['peak'] / MB:6.1f} MB"
        return (f"{name:38s} RSS {r['after'] / MB:6.1f} MB (before start {r['before'] / MB:5.1f} MB, "
                f"growth {(r['after'] - r['before']) / MB:6.1f} MB{peak}); {r['cached']} nodes cached")

    print(line("controller (informer + 4 workers + ARM)", ctl)
          + f"; {int(ctl['labelled'] or 0)} labelled in {ctl['seconds']:.1f} s, {ctl['arm_calls']} ARM calls")
    print(line("informer, labeller's projection", projected))
    print(line("informer, whole node dicts (baseline)", whole))
    growth = (ctl["after"] - ctl["before"]) / args.nodes
    print(f"per node: controller growth {growth / 1024:.1f} KiB; whole-dict informer growth "
          f"{(whole['after'] - whole['before']) / args.nodes / 1024:.1f} KiB "
          f"(ratio {(whole['after'] - whole['before']) / max(ctl['after'] - ctl['before'], 1):.1f}x)")
    print(f"tracemalloc of the cache: projected {traced['projected'] / MB:.1f} MB "
          f"({traced['projected'] / args.nodes:.0f} B per node) vs whole dicts {traced['whole'] / MB:.1f} MB "
          f"(ratio {traced['whole'] / max(traced['projected'], 1):.1f}x)")
    cli = cli_baseline()
    estimate = cli + ctl["after"] - ctl["before"]
    print(f"a `cloudzones controller` process before its first list: {cli / MB:.1f} MB (imports, clients; this "
          f"bench's processes start at {ctl['before'] / MB:.1f} MB with the fakes' code) -> estimated "
          f"{estimate / MB:.1f} MB with 5,000 nodes cached")
    verdict = "OK" if ctl["after"] <= 150 * MB else "OVER GOAL"
    peak = "" if ctl["peak"] is None else f" (peak {ctl['peak'] / MB:.1f} MB)"
    print(f"controller resident memory: {ctl['after'] / MB:.1f} MB{peak} (goal <= 150 MB)  {verdict}")


if __name__ == "__main__":
    main()
