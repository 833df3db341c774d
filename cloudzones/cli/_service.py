"""What the long-running subcommands share: a Kubernetes client, signals, the health port, and the argparse types
that refuse a bad setting at start-up (one line, exit 2) instead of a service that runs but cannot work."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import re
import signal
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from cloudzones import errors, kube, labels
from cloudzones.services import health

log = logging.getLogger("cloudzones.service")
T = TypeVar("T")


def port(value: str) -> int:
    """A TCP port, 1-65535."""
    number = _int(value)
    if number is None or not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r:.40} is not a port (1-65535)")
    return number


def port_or_off(value: str) -> int:
    """A TCP port, or 0 for off."""
    return 0 if _int(value) == 0 else port(value)


def address(value: str) -> str:
    """An IPv4 or IPv6 address to listen on."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r:.60} is not an IP address to listen on "
                                         "(0.0.0.0 for every interface, 127.0.0.1 for loopback)") from None
    return value


def positive_int(value: str) -> int:
    """A whole number of at least 1."""
    number = _int(value)
    if number is None or number < 1:
        raise argparse.ArgumentTypeError(f"{value!r:.40} is not a whole number of at least 1")
    return number


def seconds(value: str) -> float:
    """A finite number of seconds above 0."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r:.40} is not a number of seconds above 0")
    return number


def name(value: str) -> str:
    """A Kubernetes object or namespace name (RFC 1123 label, as the API server requires)."""
    if not _DNS_LABEL.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r:.80} is not a valid name (lower-case letters, digits and '-', "
                                         "1-63 characters, starting and ending with a letter or digit)")
    return value


def provisioner_name(value: str) -> str:
    """A StorageClass provisioner name: a DNS-1123 subdomain with at most one ``/`` (``example.com/disk``)."""
    if len(value) > 253 or not _PROVISIONER.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r:.80} is not a provisioner name (lower-case DNS name, optionally "
                                         "followed by '/' and a name: cloudzones.io/azure-disk)")
    return value


def url(value: str) -> str:
    """An http(s) URL with a host."""
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{value!r:.80} is not an http:// or https:// URL with a host")
    return value


def label_selector(value: str) -> str:
    """A non-empty label selector in kubectl's syntax (``a=b,c!=d,e in (f,g),!h``)."""
    problem = selector_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"{value!r:.80} is not a label selector: {problem}")
    return value


def selector_problem(value: str) -> str:
    """What is wrong with a label selector string, or ``""``."""
    if not value.strip():
        return "it is empty (an empty selector would match every pod)"
    for term in _split_terms(value):
        match = _TERM.fullmatch(term.strip())
        if match is None:
            return f"cannot read {term.strip()!r}"
        values = ([match["value"]] if match["value"] is not None else
                  [v.strip() for v in (match["values"] or "").split(",")] if match["values"] is not None else [])
        if not labels.is_label_key(match["key"]):
            return f"{match['key']!r} is not a label key"
        bad = [v for v in values if not _VALUE.fullmatch(v)]
        if bad:
            return f"{bad[0]!r} is not a label value"
    return ""


def _split_terms(value: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for index, char in enumerate(value):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(value[start:index])
            start = index + 1
    terms.append(value[start:])
    return terms


def _int(value: str) -> int | None:
    text = value.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None


_PROVISIONER = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_DNS_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?")
_TERM = re.compile(r"(?P<neg>!)?\s*(?P<key>[^\s=!,()]+)\s*(?:(?:==?|!=)\s*(?P<value>[^\s=!,()]*)|"
                   r"\s+(?:in|notin)\s*\((?P<values>[^()]*)\))?")


def listen(what: str, start: Callable[[], T]) -> T:
    """Run ``start`` (which binds a port); a bind failure becomes one `UsageError` line naming ``what``."""
    try:
        return start()
    except ssl.SSLError:
        raise  # an SSLError is an OSError too, but says something about certificates, not the port
    except OSError as exc:
        raise errors.UsageError(f"{what}: cannot listen: {exc.strerror or exc}") from None


def add_kube_options(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context`` (in-cluster configuration when neither is given)."""
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    parser.add_argument("--context", help="kubeconfig context")


def add_metrics_option(parser: argparse.ArgumentParser, default: int = 8080) -> None:
    """``--metrics-port`` for /metrics, /healthz and /readyz over plain HTTP (0 turns it off)."""
    parser.add_argument("--metrics-port", type=port_or_off, default=default, metavar="PORT",
                        help=f"plain-HTTP port for /metrics, /healthz, /readyz (default {default}; 0: off)")
    parser.add_argument("--metrics-address", type=address, default="0.0.0.0",  # noqa: S104 - probes come from the kubelet
                        help="address for the metrics port (default 0.0.0.0: the kubelet's probes reach the pod IP)")


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
    server = listen(f"--metrics-port {args.metrics_port} on {args.metrics_address}",
                    lambda: health.HealthServer((args.metrics_address, args.metrics_port), registry=registry,
                                                ready=ready).start())
    log.info("metrics and probes on %s", server.url)
    return server
