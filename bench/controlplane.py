"""Start-up and stop time of `cloudzones.testing.ControlPlane` on this machine (goal: start < 20 s on 2 cores).

Two shapes, each started ``--runs`` times: etcd + kube-apiserver (what most tests need), and the
whole control plane (plus kube-scheduler and kube-controller-manager, waited for until its
service-account controller acts). The floor is the same binaries' bare process start (``--version``),
so the ratio says how much of the time is the components' own start-up work rather than exec.

    python bench/controlplane.py [--runs 5]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from cloudzones.testing.controlplane import ControlPlane, find_binaries


def timed(scheduler: bool) -> tuple[float, float]:
    """(start seconds, stop seconds) of one control plane."""
    plane = ControlPlane(scheduler=scheduler, controller_manager=scheduler)
    started = time.perf_counter()
    plane.start()
    up = time.perf_counter() - started
    plane.client.list("nodes")  # it answers
    stopping = time.perf_counter()
    plane.stop()
    return up, time.perf_counter() - stopping


def exec_floor(binaries: pathlib.Path) -> float:
    """Seconds to exec every binary the full control plane starts, with ``--version`` (nothing else)."""
    started = time.perf_counter()
    for name in ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        subprocess.run([str(binaries / name), "--version"], capture_output=True, check=True)  # noqa: S603
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    binaries = find_binaries()
    if binaries is None:
        sys.exit("no control-plane binaries: run scripts/control-plane build")
    floor = statistics.median(exec_floor(binaries) for _ in range(args.runs))
    print(f"binaries: {binaries}")
    print(f"exec floor (4 binaries, --version): {floor:.2f} s")
    for label, full in (("etcd + kube-apiserver", False), ("full (+ scheduler, controller manager)", True)):
        runs = [timed(full) for _ in range(args.runs)]
        ups = [u for u, _ in runs]
        downs = [d for _, d in runs]
        print(f"{label:40s} start median {statistics.median(ups):5.2f} s (max {max(ups):5.2f} s, goal < 20 s, "
              f"{statistics.median(ups) / floor:4.1f}x the exec floor); stop median {statistics.median(downs):4.2f} s")


if __name__ == "__main__":
    main()
