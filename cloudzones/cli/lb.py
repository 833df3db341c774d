"""``cloudzones lb plan``: a zone-redundant Standard load balancer's backend pool and the changes it needs.

Without ``--apply`` nothing in Azure changes: with ``--cloud-config`` the current public IP and load
balancer are read (GETs only) to say what would be created or changed; without one, Azure is not
contacted at all and the plan shows the wanted state.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cloudzones import documents, errors
from cloudzones.cli import output
from cloudzones.cli.output import summary

if TYPE_CHECKING:
    from providers.azure.config import AzureConfig
    from providers.azure.lb_plan import BackendPool, Change

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add the ``lb`` subcommand and its ``plan`` action."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "lb", help="plan (and apply) a zone-redundant Standard load balancer and public IP",
        description=summary(__doc__))
    actions = parser.add_subparsers(dest="lb_command", metavar="ACTION", required=True)
    plan = actions.add_parser("plan", help="show pool membership and the resources to create or change",
                              description=__doc__.split("\n\n", 1)[1].strip().replace("``", ""))
    plan.add_argument("--nodes", required=True, metavar="NODES.yaml",
                      help="Node manifests: a v1 List (kubectl get nodes -o yaml) or a YAML list of Nodes")
    plan.add_argument("--cloud-config", metavar="PATH",
                      help="Azure cloud config (azure.json); without it Azure is not read")
    plan.add_argument("--name", default="cloudzones", type=_resource_name,
                      help="load balancer and backend pool name; the public IP is NAME-pip (default cloudzones)")
    plan.add_argument("--zone", metavar="ZONE",
                      help="pin the public IP to one zone (2 or eastus-2) instead of all zones of the region")
    plan.add_argument("--apply", action="store_true", help="create or change the resources (needs --cloud-config)")
    output.add_output_option(plan)
    plan.set_defaults(handler=run_plan)


_AZURE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,74}[A-Za-z0-9_])?")


def _resource_name(value: str) -> str:
    """An argparse type: a load balancer name Azure accepts, leaving room for the public IP's ``-pip``."""
    if not _AZURE_NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value[:100]!r} is not a usable Azure name: 1-76 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit and ending with a letter, digit or '_' (the public IP adds '-pip', Azure allows 80)")
    return value


def load_nodes(path: str) -> list[dict[str, Any]]:
    """Node manifests from a YAML/JSON file: a v1 List or NodeList, a list, or ``---``-separated Nodes."""
    nodes: list[dict[str, Any]] = documents.manifests(path, what="nodes file", kind="Node")
    if not nodes:
        raise errors.ConfigError(f"nodes file {path!r} holds no Node manifests")
    return nodes


def run_plan(args: argparse.Namespace) -> int:
    """Plan, print, and with ``--apply`` carry out; CloudZonesError propagates to the CLI (exit 1)."""
    from providers.azure import config as azure_config
    from providers.azure import lb_members, lb_plan

    if args.apply and not args.cloud_config:
        print("cloudzones lb plan: error: --apply needs --cloud-config (the subscription, group and region"
              " to create the resources in)", file=sys.stderr)
        return 2
    nodes = load_nodes(args.nodes)
    config = azure_config.AzureConfig.load(args.cloud_config) if args.cloud_config else azure_config.AzureConfig()
    lb_members.check_sku_for_zones(config, nodes)
    if config.load_balancer_sku != "standard":
        raise errors.ConfigError(f"loadBalancerSku is {config.load_balancer_sku!r}; cloudzones lb creates"
                                 " Standard load balancers and public IPs only")
    membership = lb_members.backend_pool_members(nodes, config)
    for duplicate in membership.duplicates:
        log.warning("nodes %s share provider ID %s; only the first member is in the pool",
                    ", ".join(duplicate.nodes), duplicate.provider_id)
    region = config.location or lb_members.nodes_region(nodes)
    vnet = ""
    if config.vnet_name and config.subscription_id and config.resource_group:
        vnet = lb_plan.network_id(config.subscription_id, config.vnet_resource_group or config.resource_group,
                                  "virtualNetworks", config.vnet_name)
    pool = (lb_plan.BackendPool.for_members(args.name, membership.members, virtual_network=vnet) if vnet
            else lb_plan.BackendPool(args.name))
    if vnet:
        for member in membership.members:
            if not member.address:
                log.warning("node %s reports no InternalIP address; it cannot join the IP-based pool yet", member.node)
    changes, applied = _changes(args, config, region, pool)
    data = {
        "loadBalancer": args.name, "publicIP": f"{args.name}-pip", "region": region,
        "poolType": "nodeIP" if vnet else "nodeIPConfiguration",
        "azureRead": bool(args.cloud_config), "applied": applied,
        "members": [{"node": m.node, "kind": m.kind, "zone": m.zone, "address": m.address, "machine": m.machine}
                    for m in membership.members],
        "excluded": [{"node": e.node, "reasons": list(e.reasons)} for e in membership.excluded],
        "duplicateProviderIDs": [{"providerID": d.provider_id, "nodes": list(d.nodes)} for d in membership.duplicates],
        "changes": [{"resource": c.resource, "name": c.name, "action": c.action, "detail": c.detail}
                    for c in changes],
    }
    output.emit(data, args.output, text=_text(data, vnet))
    return 0


def _changes(args: argparse.Namespace, config: AzureConfig, region: str,
             pool: BackendPool) -> tuple[list[Change], bool]:
    from providers.azure import arm, lb_plan, network
    from providers.azure import provider as azure_provider

    pip_name = f"{args.name}-pip"
    if not args.cloud_config:
        zones = lb_plan.resolve_zones(args.zone, region=region)
        pip_id = lb_plan.network_id("<subscriptionId>", "<resourceGroup>", "publicIPAddresses", pip_name)
        return [lb_plan.plan_public_ip(None, name=pip_name, location=region, zones=zones),
                lb_plan.plan_load_balancer(None, name=args.name, location=region, public_ip_ids=[pip_id],
                                           pool=pool)], False
    if not (config.subscription_id and config.resource_group and config.location):
        raise errors.ConfigError("the cloud config needs subscriptionId, resourceGroup and location for lb plan")
    provider = azure_provider.AzureProvider(config)
    api, group = provider.network(), config.resource_group
    pip_change = network.plan_public_ip(api, resource_group=group, location=config.location, name=pip_name,
                                        zones=args.zone)
    lb_change = network.plan_load_balancer(api, resource_group=group, location=config.location, name=args.name,
                                           frontend_ip=pip_name, backend_pool=pool)
    if not args.apply:
        return [pip_change, lb_change], False
    for change in (pip_change, lb_change):
        network.apply(api, change, resource_group=group, timeout=arm.ArmSettings().polling_timeout)
        log.info("%s %s: %s", change.resource, change.name, change.action)
    return [pip_change, lb_change], True


def _text(data: Mapping[str, Any], vnet: str) -> str:
    pool_note = (f"IP-based, addresses in {vnet}" if vnet
                 else "NIC-based: membership left to cloud-provider-azure (set vnetName for IP-based)")
    parts = [f"Backend pool {data['loadBalancer']} ({pool_note})\n",
             output.table(data["members"], ["node", "kind", "zone", "address", "machine"]),
             "\nExcluded nodes\n",
             output.table([{"node": e["node"], "reasons": "; ".join(e["reasons"])} for e in data["excluded"]],
                          ["node", "reasons"])]
    if data["duplicateProviderIDs"]:
        parts += ["\nDuplicate provider IDs (several nodes name one machine)\n",
                  output.table([{"providerID": d["providerID"], "nodes": ", ".join(d["nodes"])}
                                for d in data["duplicateProviderIDs"]], ["providerID", "nodes"])]
    if data["applied"]:
        heading = "Applied"
    elif data["azureRead"]:
        heading = "Changes (read from Azure; nothing changed: add --apply)"
    else:
        heading = "Wanted resources (Azure not read: no --cloud-config; actions assume nothing exists)"
    parts += [f"\n{heading}\n", output.table(data["changes"], ["resource", "name", "action", "detail"])]
    return "".join(parts)
