"""`ControlPlaneCluster`: bench/labelling.py's scenario on a real kube-apiserver (not a benchmark itself).

It offers what the bench asks of its fake API server (`RemoteKubeApi.call` with the bench's helper
functions) on `cloudzones.testing.ControlPlane` (etcd + kube-apiserver): nodes created, labels taken
off between rounds, PATCHes counted from the API server's own ``apiserver_request_total``, CPU
seconds of the kube-apiserver and etcd processes read from ``/proc``.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import urllib.request
from collections.abc import Callable
from typing import Any

from cloudzones import kube, labels, nodelabels
from cloudzones.testing.controlplane import ControlPlane

_TICKS = os.sysconf("SC_CLK_TCK")


class ControlPlaneCluster:
    """``with ControlPlaneCluster(manifests) as cluster``: the nodes exist; ``cluster.client()`` is an admin client."""

    def __init__(self, manifests: list[dict[str, Any]], *, threads: int = 8) -> None:
        self._manifests, self._threads = manifests, threads
        self.plane = ControlPlane()
        self.url = ""

    def __enter__(self) -> ControlPlaneCluster:
        self.plane.start()
        self.url = self.plane.url
        bodies = [{"metadata": m["metadata"], "spec": m.get("spec") or {}} for m in self._manifests]
        self._parallel(lambda body: self.plane.client.create(kube.NODES, body), bodies)
        return self

    def __exit__(self, *exc: object) -> None:
        self.plane.stop()

    def client(self) -> kube.KubeClient:
        """A fresh admin client (the controller's and the bare loop's)."""
        return kube.KubeClient.from_kubeconfig(self.plane.kubeconfig)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """The bench's helper ``fn`` (named after what it does), done against the real API server."""
        return getattr(self, fn.__name__)(*args)

    # -- what the bench's helpers do, for a real API server ----------------------------------------

    def unlabel(self) -> None:
        removal = {"metadata": {"labels": dict.fromkeys(nodelabels.MANAGED_KEYS)}}
        names = [m["metadata"]["name"] for m in self._manifests]
        self._parallel(lambda name: self.plane.client.patch(kube.NODES, name, removal), names)

    def reset_requests(self) -> None:
        self._patches_before = self._patch_total()

    def count_patches(self) -> int:
        return self._patch_total() - self._patches_before

    def cpu_seconds(self) -> float:
        """CPU seconds of kube-apiserver and etcd so far."""
        total = 0.0
        for name, process, _ in self.plane._processes:
            if name in ("kube-apiserver", "etcd"):
                with open(f"/proc/{process.pid}/stat", encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / _TICKS
        return total

    def count_labelled(self, expected: dict[str, dict[str, str]]) -> int:
        good = 0
        for item in self.plane.client.list(kube.NODES)["items"]:
            have = item["metadata"].get("labels") or {}
            want = expected.get(item["metadata"]["name"])
            good += want is not None and all(have.get(k) == v for k, v in want.items()) \
                and labels.FAULT_DOMAIN not in have
        return good

    def node_size(self, name: str) -> int:
        return len(json.dumps(self.plane.client.get(kube.NODES, name)))

    # -- internals ------------------------------------------------------------------------------

    _patches_before = 0

    def _patch_total(self) -> int:
        """PATCHes of nodes the API server has answered (its own counter, every status code)."""
        total = 0
        for line in self._metrics().splitlines():
            if line.startswith("apiserver_request_total{") and 'verb="PATCH"' in line and 'resource="nodes"' in line:
                total += int(float(line.rsplit(" ", 1)[1]))
        return total

    def _metrics(self) -> str:
        with urllib.request.urlopen(urllib.request.Request(f"{self.url}/metrics"),  # noqa: S310
                                    context=self.plane.ssl_context, timeout=30) as answer:
            return str(answer.read().decode())

    def _parallel(self, fn: Callable[[Any], Any], items: list[Any]) -> None:
        with concurrent.futures.ThreadPoolExecutor(self._threads) as pool:
            list(pool.map(fn, items))
