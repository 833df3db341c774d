"""``cloudzones node-agent``: label this machine's own node from its instance metadata (DaemonSet mode)."""

from __future__ import annotations

import argparse
import logging
import os
import threading
from typing import Any

from cloudzones.cli import _service
from cloudzones.cli.output import summary
from cloudzones.services import nodeagent

log = logging.getLogger("cloudzones.node-agent")


def register(subparsers: Any) -> None:
    """Add the ``node-agent`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "node-agent", help="label this node from its own IMDS (DaemonSet mode)", description=summary(__doc__))
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""),
                        help="this node's name (default: $NODE_NAME, set from spec.nodeName)")
    parser.add_argument("--provider", default="azure", choices=["azure", "aws", "gcp"], help="metadata service to read")
    parser.add_argument("--imds-url", type=_service.url, default=None,
                        help="metadata endpoint override (tests, simulations)")
    parser.add_argument("--interval", type=_service.seconds, default=300.0,
                        help="seconds between re-checks (default 300)")
    parser.add_argument("--no-beta-labels", action="store_true", help="do not write failure-domain.beta.* labels")
    _service.add_kube_options(parser)
    _service.add_metrics_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM."""
    import providers

    stop = threading.Event()
    _service.stop_on_signals(stop)
    options: dict[str, Any] = {}
    if args.imds_url:
        options["metadata_url" if args.provider == "gcp" else "imds_url"] = args.imds_url
    provider = providers.get(args.provider, **options)
    client = _service.kube_client(args)
    agent = nodeagent.NodeAgent(client, provider, args.node_name,
                                settings=nodeagent.AgentSettings(interval=args.interval,
                                                                 beta_labels=not args.no_beta_labels))
    health = _service.start_health(args, agent.registry, ready=agent.readiness)
    worker = threading.Thread(target=agent.run, name="node-agent", daemon=True)
    worker.start()
    stop.wait()
    agent.stop()
    worker.join(timeout=10)
    if health is not None:
        health.shutdown()
    client.close()
    return 0
