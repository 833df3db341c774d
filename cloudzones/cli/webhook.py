"""``cloudzones webhook``: the PV-label admission webhook over HTTPS (``POST /mutate-pv``)."""

from __future__ import annotations

import argparse
import functools
import logging
import threading
from typing import Any

from cloudzones.cli import _service
from cloudzones.cli.output import summary
from cloudzones.services.webhook import review, server

log = logging.getLogger("cloudzones.services.webhook")


def register(subparsers: Any) -> None:
    """Add the ``webhook`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "webhook", help="serve the PersistentVolume label admission webhook", description=summary(__doc__))
    parser.add_argument("--cloud-config", metavar="PATH", default="/etc/kubernetes/azure.json")
    parser.add_argument("--tls-cert-file", required=True, metavar="PATH",
                        help="serving certificate (reloaded when it changes)")
    parser.add_argument("--tls-key-file", required=True, metavar="PATH", help="its private key")
    parser.add_argument("--address", default="0.0.0.0", help="listen address")  # noqa: S104
    parser.add_argument("--port", type=int, default=8443, help="HTTPS port (default 8443)")
    parser.add_argument("--fail-closed", action="store_true",
                        help="deny PVs whose disk cannot be read (default: allow with a warning)")
    _service.add_metrics_option(parser, default=0)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM."""
    from providers.azure import provider as azure

    stop = threading.Event()
    _service.stop_on_signals(stop)
    provider = azure.provider_from_options(cloud_config=args.cloud_config)
    review_fn = functools.partial(review.review, labels_for_volume=provider.labels_for_volume,
                                  fail_closed=args.fail_closed)
    srv = server.serve(host=args.address, port=args.port, cert_file=args.tls_cert_file, key_file=args.tls_key_file,
                       review_fn=review_fn)
    health = _service.start_health(args, srv.metrics.registry, ready=lambda: True)
    stop.wait()
    srv.shutdown()
    srv.server_close()
    if health is not None:
        health.shutdown()
    return 0
