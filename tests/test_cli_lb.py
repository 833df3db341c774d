"""Tests for ``cloudzones lb plan``: membership output, reads-only planning, --apply, and exit codes."""

from __future__ import annotations

import copy
import json
import pathlib
import time
from typing import Any

import pytest
import responses
import yaml

from cloudzones.cli import main
from tests.conftest import fixture_body
from tests.test_azure_network import NOT_FOUND, SUB, THROTTLED, pip
from tests.test_lb_members import CONTROL_PLANE, EXCLUDE, node

NET = f"https://management.azure.com/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network"
TOKEN_URL = "http://169.254.169.254/metadata/identity/oauth2/token"
LB_FIXTURE = "arm/network/LoadBalancers_CreateOrUpdate_StandardZones_2025-03-01.json"


@pytest.fixture
def nodes_file(tmp_path: pathlib.Path) -> pathlib.Path:
    """A v1 List of three nodes: a VMSS worker, a VM worker without address, an excluded control plane."""
    items = [node("w-0", provider_id="vmss", ip="10.0.0.4"), node("w-1", zone="eastus-2", ip=""),
             node("cp-0", zone="eastus-3", **CONTROL_PLANE)]
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


@pytest.fixture
def azure_json(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A managed-identity cloud config (token from a mocked IMDS) for subscription SUB, group rg, eastus."""
    for name in ("IDENTITY_ENDPOINT", "IDENTITY_HEADER", "MSI_ENDPOINT", "MSI_SECRET", "AZURE_CLIENT_ID",
                 "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_POD_IDENTITY_AUTHORITY_HOST"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "azure.json"
    path.write_text(json.dumps({"cloud": "AzurePublicCloud", "subscriptionId": SUB, "resourceGroup": "rg",
                                "location": "eastus", "useManagedIdentityExtension": True}))
    return path


def with_config(path: pathlib.Path, **extra: Any) -> pathlib.Path:
    """Add keys to a cloud config file."""
    path.write_text(json.dumps(json.loads(path.read_text()) | extra))
    return path


def mock_token() -> None:
    """Answer managed-identity token requests."""
    responses.get(TOKEN_URL, json={"access_token": "t", "expires_in": "3600", "token_type": "Bearer",
                                   "expires_on": str(int(time.time()) + 3600),
                                   "resource": "https://management.azure.com/"})


def arm_calls() -> list[tuple[str, str]]:
    """(method, last path segment) of every ARM request made."""
    return [(c.request.method, c.request.url.split("?")[0].rsplit("/", 1)[-1]) for c in responses.calls
            if c.request.url.startswith("https://management.azure.com/")]


class TestLbPlanOffline:
    """Without a cloud config the plan never contacts Azure."""

    @responses.activate
    def test_table(self, nodes_file: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Members, excluded nodes with reasons, and the wanted resources; no HTTP at all."""
        assert main(["lb", "plan", "--nodes", str(nodes_file)]) == 0
        out = capsys.readouterr().out
        assert "w-0" in out and "vmss-instance" in out and "10.0.0.4" in out
        assert "cp-0" in out and "control-plane node (excludeMasterFromStandardLB is true)" in out
        assert "Azure not read" in out and "zone-redundant (1, 2, 3)" in out and "cloudzones-pip" in out
        assert len(responses.calls) == 0

    def test_json(self, nodes_file: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """JSON output: members in input order, the excluded node with its reasons, two create actions."""
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--name", "web", "--zone", "eastus-2", "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [m["node"] for m in data["members"]] == ["w-0", "w-1"]
        assert data["excluded"] == [{"node": "cp-0", "reasons": ["control-plane node (excludeMasterFromStandardLB is true)"]}]
        assert [(c["resource"], c["name"], c["action"]) for c in data["changes"]] == [
            ("publicIPAddress", "web-pip", "create"), ("loadBalancer", "web", "create")]
        assert data["changes"][0]["detail"] == "Standard, static, zonal (zone 2)"
        assert data["azureRead"] is False and data["applied"] is False and data["poolType"] == "nodeIPConfiguration"

    def test_duplicate_provider_ids_reported(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Two nodes naming one machine: a table section, the JSON list, a warning; the second is excluded."""
        path = tmp_path / "nodes.yaml"
        path.write_text(yaml.safe_dump([node("w-0", provider_id="vmss"), node("w-9", provider_id="vmss")]))
        assert main(["lb", "plan", "--nodes", str(path)]) == 0
        out, err = capsys.readouterr()
        assert "Duplicate provider IDs" in out and "w-0, w-9" in out
        assert "share provider ID" in err
        assert main(["lb", "plan", "--nodes", str(path), "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [d["nodes"] for d in data["duplicateProviderIDs"]] == [["w-0", "w-9"]]
        assert [m["node"] for m in data["members"]] == ["w-0"] and data["excluded"][0]["node"] == "w-9"

    def test_fixture_nodes_have_distinct_provider_ids(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The shipped three-zone nodes file names ten machines: nothing duplicated, nine workers in the pool."""
        fixture = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "plans" / "nodes-3zones.yaml"
        assert main(["lb", "plan", "--nodes", str(fixture), "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["duplicateProviderIDs"] == [] and len(data["members"]) == 10
        assert len({m["machine"].lower() for m in data["members"]}) == 10

    @pytest.mark.parametrize("layout", ["list", "documents", "nodelist"])
    def test_node_file_layouts(self, tmp_path: pathlib.Path, layout: str, capsys: pytest.CaptureFixture[str]) -> None:
        """A YAML list, ---separated Nodes and a NodeList are all read."""
        items = [node("a"), node("b", **EXCLUDE)]
        path = tmp_path / "n.yaml"
        if layout == "list":
            path.write_text(yaml.safe_dump(items))
        elif layout == "documents":
            path.write_text(yaml.safe_dump_all(items))
        else:
            path.write_text(json.dumps({"kind": "NodeList", "items": items}))
        assert main(["lb", "plan", "--nodes", str(path), "-o", "yaml"]) == 0
        data = yaml.safe_load(capsys.readouterr().out)
        assert [m["node"] for m in data["members"]] == ["a"] and data["excluded"][0]["node"] == "b"

    @pytest.mark.parametrize(("content", "message"), [
        ("kind: Pod\nmetadata: {name: p}\n", "document 1: expected a Node, got a Pod"),
        ("", "holds no Node manifests"),
        ("items: [\n", "not valid YAML or JSON: did not find expected node content (line 2, column 1)"),
    ])
    def test_bad_nodes_file(self, tmp_path: pathlib.Path, content: str, message: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
        """A file without Nodes exits 1 naming the problem."""
        path = tmp_path / "n.yaml"
        path.write_text(content)
        assert main(["lb", "plan", "--nodes", str(path)]) == 1
        assert message in capsys.readouterr().err

    def test_apply_needs_cloud_config(self, nodes_file: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--apply without --cloud-config is a usage error (exit 2)."""
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--apply"]) == 2
        captured = capsys.readouterr()
        assert "--apply needs --cloud-config" in captured.err and captured.out == ""

    def test_usage(self) -> None:
        """lb without an action, or plan without --nodes, exits 2."""
        for argv in (["lb"], ["lb", "plan"]):
            with pytest.raises(SystemExit) as info:
                main(argv)
            assert info.value.code == 2

    def test_bad_zone(self, nodes_file: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A fault domain given as --zone exits 1."""
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--zone", "0"]) == 1
        assert "'0'" in capsys.readouterr().err


class TestLbPlanWithAzure:
    """With a cloud config the plan reads Azure (GET only) and --apply writes."""

    @responses.activate
    def test_plan_reads_only(self, nodes_file: pathlib.Path, azure_json: pathlib.Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
        """Missing resources are reported as create; only GETs reach ARM."""
        mock_token()
        responses.get(f"{NET}/publicIPAddresses/cloudzones-pip", status=404, json=NOT_FOUND)
        responses.get(f"{NET}/loadBalancers/cloudzones", status=404, json=NOT_FOUND)
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--cloud-config", str(azure_json), "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [c["action"] for c in data["changes"]] == ["create", "create"] and data["azureRead"] is True
        assert arm_calls() == [("GET", "cloudzones-pip"), ("GET", "cloudzones")]

    @responses.activate
    def test_apply_with_vnet(self, nodes_file: pathlib.Path, azure_json: pathlib.Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
        """--apply PUTs the IP, then the LB with the members that have an address in the configured vnet."""
        mock_token()
        with_config(azure_json, vnetName="vnet", vnetResourceGroup="net-rg")
        responses.get(f"{NET}/publicIPAddresses/cloudzones-pip", status=404, json=NOT_FOUND)
        responses.get(f"{NET}/loadBalancers/cloudzones", status=404, json=NOT_FOUND)
        responses.put(f"{NET}/publicIPAddresses/cloudzones-pip", status=201, json=pip(["1", "2", "3"], "201"))
        responses.put(f"{NET}/loadBalancers/cloudzones", status=201, json=fixture_body(LB_FIXTURE, "201"))
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--cloud-config", str(azure_json), "--apply"]) == 0
        captured = capsys.readouterr()
        assert "Applied" in captured.out and "IP-based" in captured.out
        assert "w-1 reports no InternalIP" in captured.err
        assert arm_calls() == [("GET", "cloudzones-pip"), ("GET", "cloudzones"),
                               ("PUT", "cloudzones-pip"), ("PUT", "cloudzones")]
        lb = json.loads([c.request.body for c in responses.calls if c.request.method == "PUT"][1])
        [pool] = lb["properties"]["backendAddressPools"]
        vnet = f"/subscriptions/{SUB}/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/vnet"
        assert pool["properties"]["loadBalancerBackendAddresses"] == [
            {"name": "w-0", "properties": {"ipAddress": "10.0.0.4", "virtualNetwork": {"id": vnet}}}]

    @responses.activate
    def test_apply_nothing_to_do(self, nodes_file: pathlib.Path, azure_json: pathlib.Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        """When both resources already match, --apply sends no PUT."""
        mock_token()
        lb = copy.deepcopy(fixture_body(LB_FIXTURE))
        pip_id = f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/cloudzones-pip"
        lb["properties"]["frontendIPConfigurations"].append(
            {"name": "cloudzones-pip", "properties": {"publicIPAddress": {"id": pip_id}}})
        lb["properties"]["backendAddressPools"].append({"name": "cloudzones", "properties": {}})
        responses.get(f"{NET}/publicIPAddresses/cloudzones-pip", json=pip(["1", "2", "3"]))
        responses.get(f"{NET}/loadBalancers/cloudzones", json=lb)
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--cloud-config", str(azure_json), "--apply",
                     "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [c["action"] for c in data["changes"]] == ["none", "none"] and data["applied"] is True
        assert [m for m, _ in arm_calls()] == ["GET", "GET"]

    @responses.activate
    def test_zones_immutable_exit_1(self, nodes_file: pathlib.Path, azure_json: pathlib.Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """An existing zonal IP where zone-redundant is wanted: exit 1, nothing written."""
        mock_token()
        responses.get(f"{NET}/publicIPAddresses/cloudzones-pip", json=pip(["1"]))
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--cloud-config", str(azure_json), "--apply"]) == 1
        captured = capsys.readouterr()
        assert "zones are immutable" in captured.err and captured.out == ""
        assert arm_calls() == [("GET", "cloudzones-pip")]

    @responses.activate
    def test_throttled_exit_1(self, nodes_file: pathlib.Path, azure_json: pathlib.Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
        """A 429 exits 1 with the Retry-After in the message."""
        mock_token()
        responses.get(f"{NET}/publicIPAddresses/cloudzones-pip", status=429, headers={"Retry-After": "12"},
                      json=THROTTLED)
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--cloud-config", str(azure_json)]) == 1
        assert "retry after 12s" in capsys.readouterr().err

    def test_basic_sku_with_zoned_nodes(self, nodes_file: pathlib.Path, azure_json: pathlib.Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """loadBalancerSku: basic with zoned nodes exits 1 explaining zones need Standard, before any request."""
        with_config(azure_json, loadBalancerSku="basic")
        with responses.RequestsMock() as mock:
            assert main(["lb", "plan", "--nodes", str(nodes_file), "--cloud-config", str(azure_json)]) == 1
            assert len(mock.calls) == 0
        assert "availability zones need loadBalancerSku: standard" in capsys.readouterr().err

    @responses.activate
    def test_control_plane_kept_when_configured(self, nodes_file: pathlib.Path, azure_json: pathlib.Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        """excludeMasterFromStandardLB: false in the cloud config puts the control plane in the pool."""
        mock_token()
        with_config(azure_json, excludeMasterFromStandardLB=False)
        responses.get(f"{NET}/publicIPAddresses/cloudzones-pip", status=404, json=NOT_FOUND)
        responses.get(f"{NET}/loadBalancers/cloudzones", status=404, json=NOT_FOUND)
        assert main(["lb", "plan", "--nodes", str(nodes_file), "--cloud-config", str(azure_json), "-o", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [m["node"] for m in data["members"]] == ["w-0", "w-1", "cp-0"] and data["excluded"] == []


class TestLbName:
    """--name must be a name Azure accepts for both the load balancer and NAME-pip."""

    @pytest.mark.parametrize("name", ["a/b", "x" * 77, "-lead", "trail.", "", "sp ace"])
    def test_refused(self, name: str, capsys: pytest.CaptureFixture[str]) -> None:
        """Slashes, over 76 characters, bad first or last characters: usage error, exit 2, one line."""
        with pytest.raises(SystemExit) as info:
            main(["lb", "plan", "--nodes", "unused.yaml", f"--name={name}"])
        assert info.value.code == 2 and "is not a usable Azure name" in capsys.readouterr().err

    @pytest.mark.parametrize("name", ["lb", "x" * 76, "a_b.c-d", "ends_"])
    def test_accepted(self, name: str) -> None:
        """Names within Azure's rules parse."""
        from cloudzones.cli import build_parser
        assert build_parser().parse_args(["lb", "plan", "--nodes", "n.yaml", "--name", name]).name == name
