"""The public API of ../shared/CONTRACT.md: every name exists with the documented parameters."""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from typing import Any

import pytest
import responses

import cloudzones
import providers
from cloudzones import errors, labels, placement
from cloudzones.cli import build_parser
from cloudzones.services import logs
from providers import aws, azure, gcp
from storageclass import Provisioner, StorageClassSpec, choose_zones, select_zones, volume_topology
from tests.conftest import FakeClock, FakeCredential


def params(fn: Any) -> dict[str, inspect.Parameter]:
    """The parameters of ``fn`` by name."""
    return dict(inspect.signature(fn).parameters)


class TestContract:
    """Names, signatures and error classes are as the contract says."""

    @pytest.mark.parametrize(("name", "bases"), [
        ("InvalidZone", (ValueError,)), ("InvalidResourceId", (ValueError,)), ("NodeNotFound", (LookupError,)),
        ("MetadataError", ()), ("CloudApiError", ()), ("InvalidStorageClass", (ValueError,)),
        ("NoZonedNodes", ()), ("NotEnoughCandidates", ()),
    ])
    def test_errors(self, name: str, bases: tuple[type, ...]) -> None:
        """Each error derives from CloudZonesError and the listed builtins."""
        cls = getattr(errors, name)
        assert issubclass(cls, errors.CloudZonesError) and all(issubclass(cls, base) for base in bases)

    def test_error_attributes(self) -> None:
        """CloudApiError keeps status and retry_after; NotEnoughCandidates chosen and required."""
        api_error = errors.CloudApiError("x", status=429, retry_after=3.0)
        short = errors.NotEnoughCandidates("x", chosen=["a"], required=3)
        assert (api_error.status, api_error.retry_after, short.chosen, short.required) == (429, 3.0, ["a"], 3)

    def test_core(self) -> None:
        """Topology is a frozen dataclass with the documented fields; labels constants exist."""
        fields = [f.name for f in dataclasses.fields(cloudzones.Topology)]
        assert fields[:3] == ["region", "zone", "fault_domain"]
        assert cloudzones.Topology.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert "beta" in params(cloudzones.Topology.labels)
        assert (labels.ZONE, labels.REGION, labels.BETA_ZONE, labels.BETA_REGION) == (
            "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
            "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region")

    def test_placement(self) -> None:
        """Placement names and their parameters."""
        assert list(params(placement.choose_distributed))[:4] == ["candidates", "count", "fields", "hard_limits"]
        assert list(params(placement.feasible_nodes)) == ["pod", "nodes", "pods"]
        assert list(params(placement.plan_spread))[:4] == ["pod", "count", "nodes", "pods"]
        assert list(params(placement.replica_to_remove)) == ["replicas", "engine_node"]
        assert list(params(placement.tolerated_zone_failures)) == ["replication_factor", "zones"]
        assert [f.name for f in dataclasses.fields(placement.Candidate)] == ["id", "locality", "priority"]
        assert [f.name for f in dataclasses.fields(placement.Replica)] == ["name", "node", "disk", "zone"]

    def test_providers(self) -> None:
        """providers.get, the Azure adapter's names, AWS and GCP constructors."""
        assert isinstance(providers.get("aws"), providers.Provider)
        assert isinstance(providers.get("gcp"), providers.Provider)
        assert {"credential", "imds_url", "resource_manager_url"} <= set(params(azure.AzureProvider))
        assert params(azure.AzureProvider)["imds_url"].default == "http://169.254.169.254"
        assert params(aws.AwsProvider)["imds_url"].default == "http://169.254.169.254"
        assert params(gcp.GcpProvider)["metadata_url"].default == "http://metadata.google.internal"
        assert [f.name for f in dataclasses.fields(azure.ResourceId)] == [
            "subscription", "resource_group", "resource_type", "name", "scale_set", "instance_id"]
        for name in ("load", "from_mapping"):
            assert callable(getattr(azure.AzureConfig, name))
        for name in ("labels_for_volume", "local_topology", "topology_by_provider_id", "topology_by_node_name"):
            assert callable(getattr(azure.AzureProvider, name))

    def test_storageclass(self) -> None:
        """StorageClass names and their parameters."""
        assert {"spec", "pvc_name", "active_zones", "selected_node", "replicas"} <= set(params(select_zones))
        assert list(params(choose_zones)) == ["zones", "pvc_name", "count"]
        assert list(params(volume_topology)) == ["zone", "region", "zone_redundant"]
        assert {"pvc", "storage_class", "active_zones", "selected_node"} <= set(params(Provisioner.provision))
        spec = StorageClassSpec.from_manifest({"metadata": {"name": "s"}, "parameters": {}})
        for attribute in ("zoned", "zone", "zones", "allowed_zones", "binding_mode", "sku"):
            assert hasattr(spec, attribute)

    def test_cli_subcommands(self) -> None:
        """The command line offers at least the contract's subcommands."""
        parser = build_parser()
        choices = next(a for a in parser._actions if a.dest == "command").choices
        assert {"zone", "volume-zone", "plan", "controller", "webhook", "simulate"} <= set(choices)


class TestClouds:
    """The cloud config's `cloud` picks the ARM endpoint."""

    @responses.activate
    @pytest.mark.parametrize(("cloud", "host"), [("AzureChinaCloud", "management.chinacloudapi.cn"),
                                                 ("AzureUSGovernmentCloud", "management.usgovcloudapi.net"),
                                                 ("AzurePublicCloud", "management.azure.com")])
    def test_endpoint(self, cloud: str, host: str) -> None:
        """Requests go to the cloud's own Resource Manager."""
        responses.get(f"https://{host}/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm",
                      status=404, json={"error": {"code": "ResourceNotFound", "message": "x"}})
        clock = FakeClock()
        provider = azure.AzureProvider(azure.AzureConfig.from_mapping({"cloud": cloud, "subscriptionId": "s"}, environ={}),
                                       credential=FakeCredential(), clock=clock, sleep=clock.sleep)
        with pytest.raises(errors.NodeNotFound):
            provider.topology_by_provider_id(
                "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm")
        assert len(responses.calls) == 1


class TestJsonLogs:
    """--log-format json writes one JSON object per line."""

    def test_format(self) -> None:
        """Fields and extras come through; the line parses."""
        record = logging.makeLogRecord({"name": "cloudzones.x", "levelname": "WARNING", "msg": "node %s",
                                        "args": ("n1",), "node": "n1"})
        line = json.loads(logs.JsonFormatter().format(record))
        assert (line["level"], line["logger"], line["message"], line["node"]) == ("warning", "cloudzones.x", "node n1", "n1")
