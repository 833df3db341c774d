"""``cloudzones webhook``: the PV-label admission webhook over HTTPS (``POST /mutate-pv``)."""

from __future__ import annotations

import argparse
import functools
import logging
import ssl
import threading
from typing import Any

from cloudzones import documents, errors
from cloudzones.cli import _service
from cloudzones.cli.output import summary
from cloudzones.services.webhook import budget, review, server

log = logging.getLogger("cloudzones.services.webhook")


def register(subparsers: Any) -> None:
    """Add the ``webhook`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "webhook", help="serve the PersistentVolume label admission webhook", description=summary(__doc__))
    parser.add_argument("--cloud-config", metavar="PATH", default="/etc/kubernetes/azure.json")
    parser.add_argument("--tls-cert-file", required=True, metavar="PATH",
                        help="serving certificate (reloaded when it changes)")
    parser.add_argument("--tls-key-file", required=True, metavar="PATH", help="its private key")
    parser.add_argument("--address", type=_service.address, default="0.0.0.0", help="listen address")  # noqa: S104
    parser.add_argument("--port", type=_service.port, default=8443, help="HTTPS port (default 8443)")
    parser.add_argument("--review-budget", type=_review_budget, default=3.0, metavar="SECONDS",
                        help="longest a review may wait for Azure before answering anyway (default 3; keep it "
                             "below the webhook's timeoutSeconds, 5 in deploy/)")
    parser.add_argument("--fail-closed", action="store_true",
                        help="deny PVs whose disk cannot be read (default: allow with a warning)")
    _service.add_metrics_option(parser, default=0)
    parser.set_defaults(handler=run)


def _review_budget(value: str) -> float:
    """Seconds above 0 and below the request deadline, which would cut the connection before the late answer."""
    seconds = _service.seconds(value)
    deadline = server.ServerLimits().request_seconds
    if seconds >= deadline:
        raise argparse.ArgumentTypeError(f"{value!r:.40} is not below the server's {deadline:g} s request deadline")
    return seconds


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM."""
    from providers.azure import provider as azure

    stop = threading.Event()
    _service.stop_on_signals(stop)
    provider = azure.provider_from_options(cloud_config=args.cloud_config)
    provider.check_arm_settings()  # no credentials: stop now rather than allow every PV unlabelled
    review_fn = functools.partial(review.review, labels_for_volume=provider.labels_for_volume,
                                  fail_closed=args.fail_closed)
    late = budget.for_reviews(args.review_budget, fail_closed=args.fail_closed)
    for flag, path in (("--tls-cert-file", args.tls_cert_file), ("--tls-key-file", args.tls_key_file)):
        documents.read_text(path, what=flag, limit=1024 * 1024)  # missing, unreadable, a directory: one line
    try:
        srv = _service.listen(f"--port {args.port} on {args.address}", lambda: server.serve(
            host=args.address, port=args.port, cert_file=args.tls_cert_file, key_file=args.tls_key_file,
            review_fn=review_fn, budget=late))
    except ssl.SSLError as exc:
        raise errors.UsageError(f"--tls-cert-file {args.tls_cert_file} and --tls-key-file {args.tls_key_file}: "
                                f"not a certificate and its key ({exc.reason or exc})") from None
    health = _service.start_health(args, srv.metrics.registry, ready=lambda: "")
    stop.wait()
    srv.shutdown()
    srv.server_close()
    if health is not None:
        health.shutdown()
    return 0
