"""Off-cloud zone detection give-up time on real sockets (goal < 2 s; < 6 s for a silent peer).

Four cases: a refused port; a real dropped SYN (a loopback listener whose accept queue is full: the
kernel drops further SYNs, so the client waits for its connect timeout, as behind a firewall that
drops); a blackholed address (TEST-NET-1: dropped SYNs where the network drops them, but refused or
unreachable in sandboxes without a route, so it may not measure a drop); and a peer that accepts the
connection but never answers.

    python bench/detect.py
"""

from __future__ import annotations

import pathlib
import socket
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from cloudzones import errors
from providers.azure import AzureConfig, AzureProvider


def give_up_time(url: str) -> tuple[float, str]:
    provider = AzureProvider(AzureConfig.from_mapping({}, environ={}), imds_url=url)
    start = time.perf_counter()
    try:
        provider.local_topology()
        outcome = "answered?!"
    except errors.MetadataError as exc:
        outcome = str(exc)[:90]
    return time.perf_counter() - start, outcome


def main() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    refused_port = closed.getsockname()[1]
    closed.close()
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)  # an accept queue of one, never accepted from
    fillers = []
    for _ in range(3):  # fill it; their own SYNs may be dropped too, which is fine
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(full.getsockname())
        fillers.append(filler)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes handshakes; nobody ever reads or answers
    cases = [
        ("refused (closed port)", f"http://127.0.0.1:{refused_port}", 2.0),
        ("dropped SYN (full accept queue)", f"http://127.0.0.1:{full.getsockname()[1]}", 2.0),
        ("blackhole (192.0.2.1)", "http://192.0.2.1", 2.0),
        ("silent peer (accepts, never answers)", f"http://127.0.0.1:{silent.getsockname()[1]}", 6.0),
    ]
    for name, url, goal in cases:
        seconds, outcome = give_up_time(url)
        verdict = "OK" if seconds < goal else "TOO SLOW"
        print(f"{name:38s} gave up after {seconds:5.2f}s (goal < {goal:.0f}s) {verdict}: {outcome}")
    silent.close()
    for sock in (full, *fillers):
        sock.close()


if __name__ == "__main__":
    main()
