"""Benchmark: the Kubernetes plumbing at cluster scale, against the fake API server over loopback.

Scenario: 5,000 nodes shaped like AKS nodes (about 6.5 KB of JSON each: 15 labels, 5 conditions,
addresses, nodeInfo, 20 images). Measures, in one run:

* a whole-list through `KubeClient.list`, against a single GET of one node as the baseline;
* `Informer` sync (list + watch open) and the memory of its cache with a labeler's projection
  (name, labels, providerID), against a cache of whole objects (tracemalloc, same run);
* watch throughput: N label patches made in-process, time until the informer delivered the last;
* merge-PATCH round trips per second through `KubeClient.patch`, against GET round trips.

Run:  PYTHONPATH=. python bench/kube_informer.py [--nodes 5000] [--patches 500]
"""

from __future__ import annotations

import argparse
import gc
import threading
import time
import tracemalloc
from typing import Any

from cloudzones import kube
from cloudzones.kube import informer
from cloudzones.testing import FakeKubeApi


def make_node(i: int) -> dict[str, Any]:
    """A node manifest of realistic size."""
    name = f"aks-pool-{i:05d}-vmss{i:06x}"
    return {
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "Standard_D4s_v5", "agentpool": "pool",
            "kubernetes.azure.com/agentpool": "pool", "kubernetes.azure.com/cluster": "MC_rg_cluster_eastus",
            "kubernetes.azure.com/mode": "user", "kubernetes.azure.com/node-image-version": "AKSUbuntu-2204",
            "kubernetes.azure.com/os-sku": "Ubuntu", "kubernetes.azure.com/role": "agent",
            "storageprofile": "managed", "storagetier": "Premium_LRS", "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"providerID": f"azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/"
                               f"virtualMachineScaleSets/aks-pool-vmss/virtualMachines/{i}",
                 "podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24"},
        "status": {
            "conditions": [{"type": t, "status": "False", "reason": f"Kubelet{t}", "message": f"kubelet {t} ok",
                            "lastHeartbeatTime": "2024-05-01T12:00:00Z", "lastTransitionTime": "2024-05-01T12:00:00Z"}
                           for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "Ready")],
            "addresses": [{"type": "InternalIP", "address": f"10.224.{i // 256 % 256}.{i % 256}"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.30.3", "osImage": "Ubuntu 22.04.4 LTS", "architecture": "amd64",
                         "containerRuntimeVersion": "containerd://1.7.15", "kernelVersion": "5.15.0-1064-azure",
                         "machineID": f"{i:032x}", "systemUUID": f"{i:08x}-0000-0000-0000-000000000000"},
            "images": [{"names": [f"mcr.microsoft.com/oss/kubernetes/image-{j}@sha256:{j:064x}",
                                  f"mcr.microsoft.com/oss/kubernetes/image-{j}:v1.{j}"], "sizeBytes": 1000000 + j}
                       for j in range(20)],
            "capacity": {"cpu": "4", "memory": "16393436Ki", "pods": "110"},
        },
    }


def project(node: dict[str, Any]) -> tuple[str, dict[str, str], str]:
    """What the node labeler keeps."""
    return (node["metadata"]["name"], dict(node["metadata"].get("labels") or {}),
            str((node.get("spec") or {}).get("providerID") or ""))


def synced_informer(client: kube.KubeClient, projection: Any) -> tuple[informer.Informer[Any], float]:
    """A started informer over nodes, once synced, and the seconds the sync took."""
    start = time.perf_counter()
    inf = informer.Informer(client, kube.NODES, project=projection,
                            settings=informer.InformerSettings(resync_period=0))
    inf.start()
    inf.wait_for_sync(120)
    return inf, time.perf_counter() - start


def retained_bytes(client: kube.KubeClient, projection: Any) -> int:
    """Bytes still allocated while a synced informer is alive (its cache, essentially), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    inf, _ = synced_informer(client, projection)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    inf.stop()
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--patches", type=int, default=500)
    args = parser.parse_args()

    with FakeKubeApi() as api, kube.KubeClient.for_host(api.url) as client:
        start = time.perf_counter()
        for i in range(args.nodes):
            api.create("nodes", make_node(i))
        print(f"seeded {args.nodes} nodes in-process in {time.perf_counter() - start:.2f} s")

        name = make_node(0)["metadata"]["name"]
        for _ in range(5):  # warm up: the client builds its request validators on first use
            client.get(kube.NODES, name)
        start = time.perf_counter()
        for _ in range(50):
            client.get(kube.NODES, name)
        get_s = (time.perf_counter() - start) / 50
        start = time.perf_counter()
        listed = client.list(kube.NODES)
        list_s = time.perf_counter() - start
        print(f"list of {len(listed['items'])} nodes: {list_s:.2f} s  (one GET: {get_s * 1000:.2f} ms; "
              f"list/GET = {list_s / get_s:.0f}x, per node {list_s / args.nodes * 1000:.3f} ms)")

        timings = []
        for projection in (project, None):
            inf, seconds = synced_informer(client, projection)
            inf.stop()
            timings.append(seconds)
        light_sync, whole_sync = timings
        light, whole = retained_bytes(client, project), retained_bytes(client, None)
        print(f"informer sync (list + watch open): {light_sync:.2f} s projected, {whole_sync:.2f} s whole objects "
              f"(sync/list = {light_sync / list_s:.2f}x)")
        print(f"cache memory: projected {light / 1e6:.1f} MB vs whole objects {whole / 1e6:.1f} MB "
              f"(ratio {whole / max(light, 1):.1f}x; {light / args.nodes:.0f} B per node)")

        delivered = threading.Event()
        target = f"bench-{args.patches - 1}"

        def on_update(old: Any, new: Any) -> None:
            if new[1].get("bench") == target:
                delivered.set()

        inf = informer.Informer(client, kube.NODES, project=project, on_update=on_update,
                                settings=informer.InformerSettings(resync_period=0))
        inf.start()
        inf.wait_for_sync(120)
        api.wait_for_watches(1)
        start = time.perf_counter()
        for i in range(args.patches):
            api.patch("nodes", make_node(i % args.nodes)["metadata"]["name"],
                      {"metadata": {"labels": {"bench": f"bench-{i}"}}})
        delivered.wait(120)
        watch_s = time.perf_counter() - start
        inf.stop()
        print(f"watch: {args.patches} changes delivered in {watch_s:.2f} s ({args.patches / watch_s:.0f} events/s)")

        start = time.perf_counter()
        for i in range(args.patches):
            client.patch(kube.NODES, make_node(i % args.nodes)["metadata"]["name"],
                         {"metadata": {"labels": {"bench2": str(i)}}})
        patch_s = (time.perf_counter() - start) / args.patches
        print(f"merge PATCH round trip: {patch_s * 1000:.2f} ms ({1 / patch_s:.0f}/s; "
              f"PATCH/GET = {patch_s / get_s:.2f}x)")


if __name__ == "__main__":
    main()
