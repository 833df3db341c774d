"""``cloudzones controller``: label every node with its zone through ARM, leader-elected through a Lease."""

from __future__ import annotations

import argparse
import logging
import threading
from typing import Any

from cloudzones.cli import _service
from cloudzones.cli.output import summary
from cloudzones.kube import informer, leader
from cloudzones.services import annotator, controller

log = logging.getLogger("cloudzones.services.controller")


def register(subparsers: Any) -> None:
    """Add the ``controller`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "controller", help="run the node labeller (Deployment mode)", description=summary(__doc__))
    parser.add_argument("--cloud-config", metavar="PATH", default="/etc/kubernetes/azure.json",
                        help="cloud-provider-azure cloud config (default /etc/kubernetes/azure.json)")
    _service.add_kube_options(parser)
    _service.add_metrics_option(parser)
    parser.add_argument("--workers", type=_service.positive_int, default=4, help="concurrent reconciles (default 4)")
    parser.add_argument("--no-beta-labels", action="store_true", help="do not write failure-domain.beta.* labels")
    parser.add_argument("--resync-period", type=_service.seconds, default=300.0, help="seconds between full re-checks")
    parser.add_argument("--no-leader-election", action="store_true", help="act without holding the Lease")
    parser.add_argument("--leader-election-namespace", type=_service.name, default="cloudzones-system",
                        help="namespace of the Lease")
    parser.add_argument("--leader-election-name", type=_service.name, default="cloudzones-controller",
                        help="name of the Lease")
    parser.add_argument("--annotate-pods", metavar="SELECTOR", type=_service.label_selector,
                        help="also copy node topology labels into annotations of pods matching SELECTOR")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM; returns the exit code."""

    stop = threading.Event()
    _service.stop_on_signals(stop)
    from providers.azure import provider as azure

    provider = azure.provider_from_options(cloud_config=args.cloud_config)
    provider.check_arm_settings()  # no credentials: stop now, with one line, rather than run useless
    client = _service.kube_client(args)
    settings = controller.ControllerSettings(
        beta_labels=not args.no_beta_labels, workers=args.workers,
        informer=informer.InformerSettings(resync_period=args.resync_period))
    pods: annotator.PodZoneAnnotator | None = None
    labeller = controller.NodeLabeler(client, provider, settings=settings,
                                      on_node_change=lambda name: pods.node_changed(name) if pods else 0)
    if args.annotate_pods:
        pods = annotator.PodZoneAnnotator(client, label_selector=args.annotate_pods, node_labels=labeller.node_labels)

    def leading(now: bool) -> None:
        labeller.set_leading(now)
        if pods is not None:
            # start/stop join threads: keep them off the elector's own thread.
            threading.Thread(target=pods.start if now else pods.stop, daemon=True, name="annotator-switch").start()

    elector = None
    if not args.no_leader_election:
        elector = leader.LeaderElector(client, name=args.leader_election_name,
                                       namespace=args.leader_election_namespace,
                                       on_started_leading=lambda: leading(True),
                                       on_stopped_leading=lambda: leading(False))
    health = _service.start_health(
        args, labeller.metrics.registry,
        ready=lambda: labeller.readiness() or (elector.problem if elector else ""))
    labeller.start(leading=elector is None)
    if elector is None and pods is not None:
        pods.start()
    election = None
    if elector is not None:
        election = threading.Thread(target=elector.run, name="leader-election", daemon=True)
        election.start()
    log.info("controller running (leader election %s)", "off" if elector is None else "on")
    stop.wait()
    if elector is not None:
        elector.stop()
        if election is not None:
            election.join(timeout=10)  # releases the Lease so the other replica takes over at once
    labeller.stop()
    if pods is not None:
        pods.stop()
    if health is not None:
        health.shutdown()
    client.close()
    return 0
