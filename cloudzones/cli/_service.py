"""What the long-running subcommands share: a Kubernetes client, the provider, signals, the health port."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from prometheus_client import CollectorRegistry

from cloudzones import kube
from cloudzones.services import health

log = logging.getLogger("cloudzones.service")


def add_kube_options(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context`` (in-cluster configuration when neither is given)."""
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    parser.add_argument("--context", help="kubeconfig context")


def add_metrics_option(parser: argparse.ArgumentParser, default: int = 8080) -> None:
    """``--metrics-port`` for /metrics, /healthz and /readyz over plain HTTP (0 turns it off)."""
    parser.add_argument("--metrics-port", type=int, default=default, metavar="PORT",
                        help=f"plain-HTTP port for /metrics, /healthz, /readyz (default {default}; 0: off)")
    parser.add_argument("--metrics-address", default="0.0.0.0", help="address for the metrics port")  # noqa: S104


def kube_client(args: argparse.Namespace) -> kube.KubeClient:
    """The client the flags ask for."""
    return kube.KubeClient.from_environment(kubeconfig=args.kubeconfig, context=args.context)


def stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` (graceful shutdown: release the lease, finish the current work)."""

    def handler(signum: int, frame: Any) -> None:
        log.info("received signal %d, shutting down", signum)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def start_health(args: argparse.Namespace, registry: CollectorRegistry, *, ready: Any) -> health.HealthServer | None:
    """Start the metrics/probe server unless ``--metrics-port 0``."""
    if not args.metrics_port:
        return None
    server = health.HealthServer((args.metrics_address, args.metrics_port), registry=registry, ready=ready).start()
    log.info("metrics and probes on %s", server.url)
    return server
