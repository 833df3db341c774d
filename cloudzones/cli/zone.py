"""``cloudzones zone``: this machine's topology from metadata, or a named node's through the cloud API."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from cloudzones import documents, errors, shapes
from cloudzones.cli import output
from cloudzones.cli.output import summary
from cloudzones.topology import Topology


def register(subparsers: Any) -> None:
    """Add the ``zone`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "zone", help="show a node's region, zone and the labels cloudzones would apply",
        description=summary(__doc__))
    parser.add_argument("--provider", default="auto", choices=["auto", "azure", "aws", "gcp"],
                        help="cloud to ask (default: whichever metadata service answers)")
    parser.add_argument("--cloud-config", metavar="PATH", help="Azure cloud config (azure.json) for ARM lookups")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--node", metavar="NAME", help="look up this node by name through the cloud API")
    target.add_argument("--provider-id", metavar="ID", help="look up this node by spec.providerID")
    target.add_argument("--imds-document", metavar="FILE",
                        help="read a saved Azure /metadata/instance JSON document instead of asking IMDS")
    parser.add_argument("--no-beta-labels", dest="no_beta", action="store_true",
                        help="leave out the beta failure-domain labels")
    # The name before 0.2; the service commands always said --no-beta-labels.
    parser.add_argument("--no-beta", dest="no_beta", action="store_true", help=argparse.SUPPRESS)
    output.add_output_option(parser)
    parser.set_defaults(handler=run)


def describe(topology: Topology, *, provider: str, beta: bool = True) -> dict[str, Any]:
    """The data ``zone`` prints for one topology."""
    return {
        "provider": provider,
        "region": topology.region,
        "zone": topology.zone,
        "faultDomain": topology.fault_domain,
        "availabilityZone": topology.is_availability_zone,
        "labels": topology.node_labels(beta=beta),
    }


def _provider(name: str, args: argparse.Namespace) -> Any:
    import providers

    # Only Azure reads a cloud config; AWS and GCP need nothing but their metadata service.
    return providers.get(name, **({"cloud_config": args.cloud_config} if name == "azure" else {}))


def _resolve(args: argparse.Namespace) -> tuple[str, Topology]:
    import providers
    from providers.azure import imds

    for flag, value in (("--node", args.node), ("--provider-id", args.provider_id),
                        ("--imds-document", args.imds_document), ("--cloud-config", args.cloud_config)):
        # An empty value must not quietly mean "not given" and probe live metadata instead.
        if value is not None and not value.strip():
            raise errors.UsageError(f"{flag} needs a value, got an empty string")
    if args.imds_document is not None and args.provider not in ("auto", "azure"):
        raise errors.UsageError(f"--imds-document reads an Azure IMDS document; it cannot be used with "
                                f"--provider {args.provider}")
    if (args.node is not None or args.provider_id is not None) and args.provider in ("aws", "gcp"):
        raise errors.UsageError(f"looking up a node by --node or --provider-id is not supported for "
                                f"{args.provider} yet (only azure); run 'cloudzones zone --provider {args.provider}' "
                                "on the machine itself")
    if args.imds_document is not None:
        document = documents.load_one(args.imds_document, what="IMDS document")
        if not isinstance(document, Mapping):
            raise documents.InputError(f"IMDS document {args.imds_document}: expected a mapping, got "
                                       f"{shapes.describe(document)}")
        return "azure", imds.topology_from_imds(document)
    if args.node is not None or args.provider_id is not None:
        name = "azure" if args.provider == "auto" else args.provider
        provider = _provider(name, args)
        if args.node is not None:
            return name, provider.topology_by_node_name(args.node)
        found = provider.topology_by_provider_id(args.provider_id)
        if found is None:
            raise errors.NodeNotFound(f"provider ID {args.provider_id!r} is not managed by {name}")
        return name, found
    if args.provider == "auto":
        chosen, topology = providers.detect([_provider(n, args) for n in providers.NAMES])
        return chosen.name, topology
    return args.provider, _provider(args.provider, args).local_topology()


def run(args: argparse.Namespace) -> int:
    """Resolve and print; errors propagate to the CLI's error handler (exit 1)."""
    provider, topology = _resolve(args)
    data = describe(topology, provider=provider, beta=not args.no_beta)
    rows = [{"field": key, "value": value} for key, value in data.items() if key != "labels"]
    rows += [{"field": f"label {key}", "value": value} for key, value in data["labels"].items()]
    output.emit(data, args.output, text=output.table(rows, ["field", "value"]))
    return 0
