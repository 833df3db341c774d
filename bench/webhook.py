"""Benchmark: webhook reviews per second and p50/p99 latency over real TLS, vs a no-op handler in the same server.

Both sides are `cloudzones.services.webhook.server.serve` on loopback with a throwaway CA. Two load
generators, each measured on its own: ``python`` (threads of `http.client` in a child process) and
``go`` (bench/loadgen: Go's net/http over keep-alive connections, as the API server's webhook client;
built once into ~/.cache/cloudzones/loadgen). The Python one costs more CPU per request than the
server (~180-260 us vs ~110-160 us), so on 2 cores it is the bottleneck at 16 clients; the Go one
(~30 us) leaves the server as the bottleneck, which is what an API server sees.

Four sides, each a fresh server: "review" answers with `cloudzones.services.webhook.review.review`
(``labels_for_volume`` returns fixed labels, so no ARM call is measured); "service" is that review
as ``cloudzones webhook`` runs it, under its 3 s review budget (`budget.for_reviews`: a deadline per
review with the server's reaper, no thread hop); the floors are "no-op", a constant allowed answer
without reading the body (what the goal is stated against, though an API server would reject it: its
uid is not the request's), and "allow-all", Kubernetes' own always-allow test webhook (agnhost):
decode the review, answer with its uid. The load comes from another process (so
that it does not share the server's GIL): each connection POSTs the fixture
``fixtures/admission/pv-create-azuredisk.json`` back to back over keep-alive (a closed loop). Latency
is measured by the client, from sending a request to having read its whole answer.

Each client count (default 1, 4 and 16 connections) is measured on its own; the server's CPU per
review (process time of the server process over answered reviews) is printed beside throughput, so
that a ratio that only holds because the server sat idle waiting for its clients shows.

Closed loops (each client sends its next review as soon as the last is answered) measure throughput
at saturation, where latency is queueing: with 16 clients and ~8,500 reviews/s the mean is already
16 / 8,500 = 1.9 ms (Little's law), and the threads' turns at the GIL are not fair, so the tail is
longer. Latency at a load below saturation is measured in an open loop (``--open-loop-rate``, default
1,000 reviews/s over the largest client count, each connection on its own schedule, latency counted
from the scheduled send time).

Last, for the largest client count, a run of each side with its review function timed from inside the
server (mean per review) beside the same function in a tight loop (best of 5): between TLS reads and writes the
caches are cold, and decoding the body alone costs several times what it does in a loop.

Goals: throughput review / no-op >= 0.9 at 1, 4 and 16 clients; p99 < 5 ms at 16 clients on loopback.

Run:  PYTHONPATH=. python bench/webhook.py [--reviews 5000] [--clients 1,4,16] [--rounds 5]
      [--load-generators python,go]
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import http.client
import json
import multiprocessing
import multiprocessing.connection
import os
import pathlib
import shutil
import ssl
import statistics
import subprocess
import tempfile
import threading
import time
import timeit
from collections.abc import Callable
from typing import Any

import orjson

from cloudzones import labels
from cloudzones.services.webhook import budget, review, server
from cloudzones.testing.tls import make_tls_files

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "admission" / "pv-create-azuredisk.json"
LOADGEN = pathlib.Path(__file__).resolve().parent / "loadgen"
LABELS = {labels.REGION: "eastus", labels.ZONE: "eastus-2", labels.BETA_REGION: "eastus",
          labels.BETA_ZONE: "eastus-2"}
NOOP_ANSWER = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}}
WARMUP = 50
"""Untimed requests per client thread first (TLS handshake, server thread start)."""


# -- the load generator (a child process) --------------------------------------------------------

def _client_thread(port: int, ca_file: str, body: bytes, count: int, *, start: threading.Barrier,
                   latencies: list[float], failures: list[str], interval: float = 0.0, phase: float = 0.0) -> None:
    context = ssl.create_default_context(cafile=ca_file)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}

    def post() -> None:
        connection.request("POST", "/mutate-pv?timeout=10s", body=body, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        if response.status != 200 or (b'"allowed": true' not in payload and b'"allowed":true' not in payload):
            failures.append(f"HTTP {response.status}: {payload[:200]!r}")

    try:
        for _ in range(WARMUP):
            post()
        start.wait()
        first = time.perf_counter() + phase
        for index in range(count):
            began = time.perf_counter()
            if interval:
                # Open loop: requests leave on a schedule, and latency counts from the scheduled time,
                # so a server that falls behind is charged for the wait (no coordinated omission).
                due = first + index * interval
                if due > began:
                    time.sleep(due - began)
                began = due
            post()
            latencies.append(time.perf_counter() - began)
    finally:
        connection.close()


def load(port: int, ca_file: str, body: bytes, total: int, threads: int, *,
         rate: float = 0.0) -> tuple[float, list[float], list[str]]:
    """Send ``total`` reviews from ``threads`` keep-alive connections; (seconds, latencies, failures).

    ``rate`` > 0: an open loop at that many reviews/s in all (each connection on its own schedule).
    """
    start = threading.Barrier(threads + 1)
    latencies: list[float] = []
    failures: list[str] = []
    workers = [threading.Thread(target=_client_thread, daemon=True,
                                args=(port, ca_file, body, total // threads + (i < total % threads)),
                                kwargs={"start": start, "latencies": latencies, "failures": failures,
                                        "interval": threads / rate if rate else 0.0,
                                        "phase": i / rate if rate else 0.0})
               for i in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - began, latencies, failures


def _client_process(conn: multiprocessing.connection.Connection) -> None:
    while (job := conn.recv()) is not None:
        *positional, rate = job
        conn.send(load(*positional, rate=rate))


# -- the server side (this process) --------------------------------------------------------------

def real_review(body: bytes) -> dict[str, Any]:
    """The webhook's review with a fixed disk lookup."""
    return review.review(body, labels_for_volume=lambda pv: LABELS)


SERVICE_BUDGET = budget.for_reviews(3.0)
"""What `cloudzones webhook` gives each review (its --review-budget default): the "service" side."""


def noop_review(body: bytes) -> dict[str, Any]:
    """Allowed, without looking at the body (not an answer an API server accepts: the uid is not the request's)."""
    return NOOP_ANSWER


def allow_all_review(body: bytes) -> dict[str, Any]:
    """Allowed, as Kubernetes' always-allow test webhook (agnhost) does it: decode, answer with the request's uid."""
    data = orjson.loads(body)
    return {"apiVersion": data["apiVersion"], "kind": "AdmissionReview",
            "response": {"uid": data["request"]["uid"], "allowed": True}}


SIDES: tuple[tuple[str, Callable[[bytes], dict[str, Any]], budget.ReviewBudget | None], ...] = (
    ("no-op", noop_review, None), ("allow-all", allow_all_review, None), ("review", real_review, None),
    ("service", real_review, SERVICE_BUDGET))
"""Name, review function and review budget of each side measured, in the order each round runs them."""


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


Load = Callable[[int, int, float], tuple[float, list[float], list[str]]]
"""``load(port, connections, rate)``: (seconds, latencies, failures) of one timed run."""


def python_load(client: multiprocessing.connection.Connection, *, tls: Any, body: bytes, total: int) -> Load:
    """The Python load generator: threads of `http.client`, in the child process behind ``client``."""
    def load(port: int, threads: int, rate: float) -> tuple[float, list[float], list[str]]:
        client.send((port, str(tls.ca_file), body, total, threads, rate))
        result: tuple[float, list[float], list[str]] = client.recv()
        return result
    return load


def go_load(binary: pathlib.Path, *, tls: Any, total: int) -> Load:
    """The Go load generator (bench/loadgen: net/http, as the API server's webhook client), one process a run."""
    def load(port: int, connections: int, rate: float) -> tuple[float, list[float], list[str]]:
        answer = subprocess.run([str(binary), "-url", f"https://127.0.0.1:{port}/mutate-pv?timeout=10s",  # noqa: S603
                                 "-ca", str(tls.ca_file), "-body", str(FIXTURE), "-n", str(total),
                                 "-c", str(connections), "-rate", str(rate), "-warmup", str(WARMUP)],
                                capture_output=True, text=True, check=False, timeout=600)
        if answer.returncode != 0:
            raise SystemExit(f"loadgen: exit {answer.returncode}: {answer.stderr[-500:]}")
        data = json.loads(answer.stdout)
        return data["seconds"], data["latencies"], data["failures"]
    return load


def build_go_load() -> pathlib.Path:
    """bench/loadgen built once per source version into the user's cache (stdlib only: no module download)."""
    digest = hashlib.sha256((LOADGEN / "main.go").read_bytes() + (LOADGEN / "go.mod").read_bytes()).hexdigest()[:16]
    binary = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "cloudzones" / \
        "loadgen" / digest / "loadgen"
    if not binary.exists():
        if shutil.which("go") is None:
            raise SystemExit("the go load generator needs Go (https://go.dev/dl/); or pass --load-generators python")
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=LOADGEN, check=True)  # noqa: S603, S607
    return binary


def measure(name: str, review_fn: Callable[[bytes], dict[str, Any]], load: Load, *, tls: Any, threads: int,
            rate: float = 0.0, review_budget: budget.ReviewBudget | None = None) -> dict[str, float]:
    """One timed run against a fresh server; its throughput, latencies and server CPU per review."""
    srv = server.serve(host="127.0.0.1", port=0, cert_file=str(tls.cert_file), key_file=str(tls.key_file),
                       review_fn=review_fn, budget=review_budget)
    try:
        cpu = time.process_time()
        seconds, latencies, failures = load(srv.server_address[1], threads, rate)
        cpu = time.process_time() - cpu
        samples = {(s.name, s.labels.get("le", "")): s.value for m in srv.metrics.registry.collect() for s in m.samples}
    finally:
        srv.shutdown()
        srv.server_close()
    if failures:
        raise SystemExit(f"{name}: {len(failures)} failed requests, first: {failures[0]}")
    answered = samples[("cloudzones_webhook_review_seconds_count", "")]
    return {"rps": len(latencies) / seconds, "p50": percentile(latencies, 0.50), "p99": percentile(latencies, 0.99),
            "max": max(latencies), "cpu_per_review": cpu / len(latencies),
            "server_under_2_5ms": samples[("cloudzones_webhook_review_seconds_bucket", "0.0025")] / answered,
            "server_under_5ms": samples[("cloudzones_webhook_review_seconds_bucket", "0.005")] / answered}


def inside(review_fn: Callable[[bytes], dict[str, Any]], load: Load, *, tls: Any, threads: int,
           body: bytes) -> tuple[float, float]:
    """Mean seconds inside ``review_fn`` per review in the server under load, and in a tight loop on its own.

    A separate run, not one of the ratios' (the timer costs the same on every side, but it is not what the
    service runs): it shows what a review costs between TLS reads and writes, where the caches are cold.
    """
    spent = [0.0, 0]

    def timed(data: bytes) -> dict[str, Any]:
        began = time.perf_counter()
        try:
            return review_fn(data)
        finally:
            spent[0] += time.perf_counter() - began
            spent[1] += 1

    measure("timed", timed, load, tls=tls, threads=threads)
    loops = 4_000
    tight = min(timeit.repeat(lambda: review_fn(body), number=loops, repeat=5)) / loops
    return spent[0] / max(1, int(spent[1])), tight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reviews", type=int, default=5000, help="timed reviews per side and round")
    parser.add_argument("--clients", default="1,4,16",
                        help="comma-separated client counts (one keep-alive connection each); default 1,4,16")
    parser.add_argument("--rounds", type=int, default=5, help="alternate no-op and review runs; medians compared")
    parser.add_argument("--open-loop-rate", type=float, default=1000.0,
                        help="reviews/s in all for the open-loop latency run at the largest client count (0: skip)")
    parser.add_argument("--load-generators", default="python,go",
                        help="python (http.client threads in a child process), go (bench/loadgen: net/http, as the "
                             "API server's webhook client), or both (default)")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]

    body = FIXTURE.read_bytes()
    check = real_review(body)["response"]
    assert check["allowed"] and check["patchType"] == "JSONPatch", check
    folder = tempfile.mkdtemp(prefix="cloudzones-bench-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # a CA key: not left behind
    tls = make_tls_files(folder)
    context = multiprocessing.get_context("spawn")
    client, child = context.Pipe()
    process = context.Process(target=_client_process, args=(child,), name="load", daemon=True)
    process.start()
    loads = {"python": python_load(client, tls=tls, body=body, total=args.reviews)}
    if "go" in args.load_generators.split(","):
        loads["go"] = go_load(build_go_load(), tls=tls, total=args.reviews)
    loads = {name: loads[name] for name in args.load_generators.split(",")}
    print(f"{args.reviews} reviews per run (load from another process), body {len(body)} B, {args.rounds} rounds")
    verdicts = []
    try:
        for generator, load in loads.items():
            for threads in counts:
                runs: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in SIDES}
                for _ in range(args.rounds):
                    for name, fn, review_budget in SIDES:
                        runs[name].append(measure(name, fn, load, tls=tls, threads=threads,
                                                  review_budget=review_budget))
                medians = {name: {key: statistics.median(r[key] for r in results) for key in results[0]}
                           for name, results in runs.items()}
                for name, m in medians.items():
                    print(f"{generator:6s} {threads:2d} clients {name:9s}: {m['rps']:6.0f} reviews/s  "
                          f"p50 {m['p50'] * 1000:5.2f} ms  p99 {m['p99'] * 1000:5.2f} ms  "
                          f"max {m['max'] * 1000:6.2f} ms  "
                          f"server CPU {m['cpu_per_review'] * 1e6:4.0f} us/review; in the server (read to answer): "
                          f"{m['server_under_2_5ms']:.1%} under 2.5 ms, {m['server_under_5ms']:.1%} under 5 ms")
                ratio = medians["review"]["rps"] / medians["no-op"]["rps"]
                cpu = medians["review"]["cpu_per_review"] / medians["no-op"]["cpu_per_review"]
                p99 = medians["review"]["p99"]
                service = medians["service"]["rps"] / medians["no-op"]["rps"]
                allow_all = medians["review"]["rps"] / medians["allow-all"]["rps"]
                verdicts.append(f"{generator:6s} {threads:2d} clients: review / no-op {ratio:.2f} (goal >= 0.9), "
                                f"server CPU per review {cpu:.2f}x the no-op's, review p99 {p99 * 1000:.2f} ms"
                                + (" (goal < 5 ms)" if threads == max(counts) else "")
                                + f"; review / allow-all {allow_all:.2f}; as the service runs it (under its review "
                                f"budget) {service:.2f}, p99 {medians['service']['p99'] * 1000:.2f} ms")
            costs = {name: inside(fn, load, tls=tls, threads=max(counts), body=body)
                     for name, fn, review_budget in SIDES if review_budget is None}
            verdicts.append(f"{generator:6s} {max(counts):2d} clients, inside the review function (a run of its own): "
                            + ", ".join(f"{name} {server_s * 1e6:.1f} us in the server, {loop_s * 1e6:.1f} in a "
                                        f"tight loop" for name, (server_s, loop_s) in costs.items()))
            if args.open_loop_rate:
                paced = measure("review", real_review, load, tls=tls, threads=max(counts), rate=args.open_loop_rate)
                verdicts.append(f"{generator:6s} {max(counts):2d} clients, open loop at {args.open_loop_rate:.0f} "
                                f"reviews/s: review p50 {paced['p50'] * 1000:.2f} ms, p99 {paced['p99'] * 1000:.2f} ms "
                                f"(goal < 5 ms), max {paced['max'] * 1000:.2f} ms")
    finally:
        client.send(None)
        process.join(10)
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
