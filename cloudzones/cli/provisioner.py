"""``cloudzones provisioner``: provision zoned Azure managed disks for claims, leader-elected through a Lease."""

from __future__ import annotations

import argparse
import logging
import threading
from typing import Any

from cloudzones.cli import _service
from cloudzones.cli.output import summary

log = logging.getLogger("cloudzones.services.provisioner")

MODES = ("balanced", "kubernetes")


def register(subparsers: Any) -> None:
    """Add the ``provisioner`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "provisioner", help="run the zoned-disk provisioner (Deployment mode)", description=summary(__doc__))
    parser.add_argument("--cloud-config", metavar="PATH", default="/etc/kubernetes/azure.json",
                        help="cloud-provider-azure cloud config (default /etc/kubernetes/azure.json)")
    _service.add_kube_options(parser)
    _service.add_metrics_option(parser)
    parser.add_argument("--provisioner-name", type=_service.provisioner_name, default="cloudzones.io/azure-disk",
                        help="the StorageClass provisioner this serves (default cloudzones.io/azure-disk)")
    parser.add_argument("--workers", type=_service.positive_int, default=4,
                        help="claims and volumes handled at once (default 4)")
    parser.add_argument("--zone-mode", choices=MODES, default="balanced",
                        help="round-robin over zones: balanced (even StatefulSets, default) or kubernetes (in-tree)")
    parser.add_argument("--csi-volumes", action="store_true",
                        help="write disk.csi.azure.com PersistentVolumes instead of in-tree azureDisk ones")
    parser.add_argument("--resync-period", type=_service.seconds, default=300.0,
                        help="seconds between full re-checks (default 300)")
    parser.add_argument("--no-leader-election", action="store_true", help="act without holding the Lease")
    parser.add_argument("--leader-election-namespace", type=_service.name, default="cloudzones-system",
                        help="namespace of the Lease")
    parser.add_argument("--leader-election-name", type=_service.name, default="cloudzones-provisioner",
                        help="name of the Lease")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM; returns the exit code."""
    from cloudzones.kube import informer, leader
    from cloudzones.services import provisioner
    from providers.azure import provider as azure

    stop = threading.Event()
    _service.stop_on_signals(stop)
    cloud = azure.provider_from_options(cloud_config=args.cloud_config)
    cloud.check_disk_settings()  # no credentials, group or location: stop now, with one line
    client = _service.kube_client(args)
    settings = provisioner.ProvisionerSettings(
        name=args.provisioner_name, workers=args.workers, mode=args.zone_mode, csi=args.csi_volumes,
        informer=informer.InformerSettings(resync_period=args.resync_period))
    service = provisioner.DiskProvisioner(client, cloud, settings=settings)
    elector = None
    if not args.no_leader_election:
        elector = leader.LeaderElector(client, name=args.leader_election_name,
                                       namespace=args.leader_election_namespace,
                                       on_started_leading=lambda: service.set_leading(True),
                                       on_stopped_leading=lambda: service.set_leading(False))
    health = _service.start_health(args, service.metrics.registry,
                                   ready=lambda: service.readiness() or (elector.problem if elector else ""))
    service.start(leading=elector is None)
    election = None
    if elector is not None:
        election = threading.Thread(target=elector.run, name="leader-election", daemon=True)
        election.start()
    log.info("provisioner %s running (leader election %s)", settings.name, "off" if elector is None else "on")
    stop.wait()
    if elector is not None:
        elector.stop()
        if election is not None:
            election.join(timeout=10)  # releases the Lease so the other replica takes over at once
    service.stop()
    if health is not None:
        health.shutdown()
    client.close()
    return 0
