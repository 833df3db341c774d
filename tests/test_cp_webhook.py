"""The PV-label webhook as a real admission hook: a real kube-apiserver calls the `cloudzones webhook` process.

The webhook runs as a process (TLS, managed identity through FakeImds, disks in FakeArm) and is
registered with the deployed MutatingWebhookConfiguration, its service reference swapped for a
loopback URL. PersistentVolumes created through the API server come back labelled as the README
promises, and what is stored passes the API server's own validation. With the process stopped,
``failurePolicy: Ignore`` lets a PV through unlabelled; the repair is the webhook's own patch,
computed by the library (`labels_for_volume` + `patch_for`) and applied with ``kubectl patch``.
"""

from __future__ import annotations

import base64
import copy
import json
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from cloudzones import errors, kube, labels
from cloudzones.services.webhook import review
from cloudzones.testing.azure import StaticCredential
from cloudzones.testing.controlplane import ControlPlane, free_port
from cloudzones.testing.tls import TlsFiles, make_tls_files
from providers.azure import AzureConfig, AzureProvider
from storageclass.topology import volume_topology
from tests.processes import REGION, RESOURCE_GROUP, ROOT, SUBSCRIPTION, FakeAzure, Service, fake_azure

PREFIX = "cp-webhook-"
CONFIG = "cloudzones-pv-labels-cp-test"
CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
DISKS = {"zoned": ["2"], "unzoned": None, "csi": ["1"]}
"""FakeArm disks (``cp-webhook-<key>``) and their zones."""


def disk_uri(name: str) -> str:
    """The ARM id of FakeArm disk ``name``."""
    return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Compute/disks/{name}"


def pv(name: str, source: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A PersistentVolume named ``cp-webhook-<name>`` with ``source`` (``{"azureDisk": ...}``) in its spec."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume",
                            "metadata": {"name": PREFIX + name, **extra.pop("metadata", {})},
                            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                                     "persistentVolumeReclaimPolicy": "Retain", **source, **extra}}
    return body


def azure_disk(disk: str) -> dict[str, Any]:
    """An in-tree ``azureDisk`` source for FakeArm disk ``cp-webhook-<disk>``."""
    return {"azureDisk": {"diskName": PREFIX + disk, "diskURI": disk_uri(PREFIX + disk), "kind": "Managed"}}


def zone_term(zone: str) -> dict[str, Any]:
    """A required node-affinity term of the CSI driver's own zone key."""
    return {"matchExpressions": [{"key": labels.CSI_DISK_ZONE, "operator": "In", "values": [zone]}]}


class Webhook:
    """The webhook process on a fixed port, restartable (the outage test stops and restarts it)."""

    def __init__(self, cloud: FakeAzure, tls: TlsFiles) -> None:
        self.cloud, self.tls, self.port = cloud, tls, free_port()
        self.service: Service | None = None

    def start(self) -> None:
        self.service = Service("webhook", "--cloud-config", str(self.cloud.cloud_config), "--tls-cert-file",
                               str(self.tls.cert_file), "--tls-key-file", str(self.tls.key_file),
                               "--address", "127.0.0.1", "--port", str(self.port), env=self.cloud.env)
        self.service.wait_for("webhook serving on")

    def stop(self) -> int:
        assert self.service is not None
        code = self.service.stop()
        # Service.stop leaves the stderr pipe to the garbage collector, a ResourceWarning (an error here).
        assert self.service.process.stderr is not None
        self.service.process.stderr.close()
        self.service = None
        return code


def webhook_configuration(url: str, ca_file: pathlib.Path) -> dict[str, Any]:
    """deploy/base/webhook.yaml's MutatingWebhookConfiguration, reaching the webhook at ``url`` instead."""
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy/base/webhook.yaml").read_text()) if d]
    config = copy.deepcopy(next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration"))
    config["metadata"] = {"name": CONFIG}  # no cert-manager here: the CA bundle is set below
    hook = config["webhooks"][0]
    hook["clientConfig"] = {"url": url, "caBundle": base64.b64encode(ca_file.read_bytes()).decode()}
    return dict(config)


def create(cp: ControlPlane, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    """Create a PV through the API server and return what it stored (or would store)."""
    path = "/api/v1/persistentvolumes" + ("?dryRun=All" if dry_run else "")
    return cp.request("POST", path, body)


def delete_ours(cp: ControlPlane) -> None:
    """Remove every PV this module created."""
    for item in cp.client.list(kube.PERSISTENT_VOLUMES)["items"]:
        if item["metadata"]["name"].startswith(PREFIX):
            cp.client.delete(kube.PERSISTENT_VOLUMES, item["metadata"]["name"])


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeAzure]:
    """FakeArm + FakeImds with the module's disks."""
    with fake_azure(tmp_path_factory.mktemp("cp-webhook-azure")) as azure:
        for key, zones in DISKS.items():
            body = {"location": REGION, "sku": {"name": "Premium_LRS"}, "properties": {"diskSizeGB": 10}}
            if zones:
                body["zones"] = zones
            status, _, _ = azure.arm.handle("PUT", disk_uri(PREFIX + key), {}, json.dumps(body).encode())
            assert status == 200
        yield azure


@pytest.fixture(scope="module")
def webhook(control_plane: ControlPlane, cloud: FakeAzure,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    """The webhook process, registered with the real API server until the module ends."""
    tls = make_tls_files(tmp_path_factory.mktemp("cp-webhook-tls"))
    hook = Webhook(cloud, tls)
    hook.start()
    control_plane.request("POST", CONFIGS, webhook_configuration(f"https://127.0.0.1:{hook.port}/mutate-pv",
                                                                 tls.ca_file))
    try:
        # The API server loads webhook configurations through an informer: dry-run creates (which
        # still call a side-effect-free webhook) show when ours is in force. Each probe is a full
        # round trip through the API server and the webhook; the deadline bounds the wait.
        deadline = time.monotonic() + 30
        while not create(control_plane, pv("probe", azure_disk("zoned")), dry_run=True)["metadata"].get("labels"):
            assert time.monotonic() < deadline, "the API server never called the webhook"
        yield hook
    finally:
        control_plane.request("DELETE", f"{CONFIGS}/{CONFIG}")
        if hook.service is not None:
            hook.stop()
        delete_ours(control_plane)


def provider_for(cloud: FakeAzure) -> AzureProvider:
    """A provider reading FakeArm, as an administrator's repair script would build from the cloud config."""
    config = AzureConfig.from_mapping({"subscriptionId": SUBSCRIPTION, "resourceGroup": RESOURCE_GROUP,
                                       "location": REGION}, environ={})
    return AzureProvider(config, credential=StaticCredential(), resource_manager_url=cloud.arm.url,
                         connection_verify=str(cloud.tls.ca_file))


def region_zone(zone: str | None) -> dict[str, str]:
    """The GA and beta labels the webhook writes for a disk in ``zone`` (None: unzoned)."""
    found = {labels.REGION: REGION, labels.BETA_REGION: REGION}
    return {**found, labels.ZONE: zone, labels.BETA_ZONE: zone} if zone else found


def requirement(key: str, value: str) -> dict[str, Any]:
    """``key In [value]``."""
    return {"key": key, "operator": "In", "values": [value]}


class TestAdmission:
    """PV CREATEs through the real API server come back as the README promises."""

    def test_in_tree_zoned_disk(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """A zoned azureDisk PV gets zone + region labels and a required term for both."""
        stored = create(control_plane, pv("zoned", azure_disk("zoned")))
        assert stored["metadata"]["labels"] == region_zone("eastus-2")
        assert stored["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            requirement(labels.ZONE, "eastus-2"), requirement(labels.REGION, REGION)]}]}}
        again = control_plane.client.get(kube.PERSISTENT_VOLUMES, PREFIX + "zoned")
        assert (again["metadata"]["labels"], again["spec"]) == (stored["metadata"]["labels"], stored["spec"])

    def test_in_tree_unzoned_disk(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """An unzoned disk gets the region label only, and a region requirement."""
        stored = create(control_plane, pv("unzoned", azure_disk("unzoned")))
        assert stored["metadata"]["labels"] == region_zone(None)
        assert stored["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
            {"matchExpressions": [requirement(labels.REGION, REGION)]}]

    def test_csi_disk_every_term(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """A CSI disk PV's every (OR-ed) term gains the zone and region requirements; its own ones stay."""
        source = {"csi": {"driver": "disk.csi.azure.com", "volumeHandle": disk_uri(PREFIX + "csi"), "fsType": "ext4"}}
        terms = [zone_term("eastus-1"), zone_term("eastus-3")]
        stored = create(control_plane, pv("csi", source, nodeAffinity={"required": {"nodeSelectorTerms": terms}},
                                          metadata={"labels": {"team": "storage"}}))
        assert stored["metadata"]["labels"] == {"team": "storage", **region_zone("eastus-1")}
        got = stored["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert got == [{"matchExpressions": [*term["matchExpressions"], requirement(labels.ZONE, "eastus-1"),
                                             requirement(labels.REGION, REGION)]} for term in terms]

    def test_nfs_untouched(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """An NFS PV is stored without labels or affinity."""
        stored = create(control_plane, pv("nfs", {"nfs": {"server": "files.example.internal", "path": "/share"}}))
        assert "labels" not in stored["metadata"] and "nodeAffinity" not in stored["spec"]

    def test_already_labelled_trusted(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """A PV that already names its zone and region is trusted, even where the disk disagrees."""
        claimed = region_zone("eastus-3")
        stored = create(control_plane, pv("labelled", azure_disk("zoned"), metadata={"labels": claimed}))
        assert stored["metadata"]["labels"] == claimed and "nodeAffinity" not in stored["spec"]


class TestValidation:
    """What cloudzones writes passes the real API server's PersistentVolume validation."""

    def test_unzoned_affinity_with_gt_stored_as_written(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """`volume_topology`'s unzoned affinity (zone In ["0"], zone Gt "0", fault-domain Exists) is kept verbatim."""
        found, affinity = volume_topology(None, REGION)
        stored = create(control_plane, pv("gt", azure_disk("unzoned"), nodeAffinity=affinity,
                                          metadata={"labels": found}))
        assert stored["spec"]["nodeAffinity"] == affinity
        assert stored["metadata"]["labels"] == found
        operators = [e["operator"] for t in affinity["required"]["nodeSelectorTerms"] for e in t["matchExpressions"]]
        assert "Gt" in operators

    def test_gt_minus_one_refused(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """The API server refuses "-1" as a label value, which is why the unzoned affinity needs two terms."""
        _, affinity = volume_topology(None, REGION)
        affinity["required"]["nodeSelectorTerms"][1]["matchExpressions"][1]["values"] = ["-1"]
        with pytest.raises(errors.KubeApiError, match="Invalid value: \"-1\""):
            create(control_plane, pv("gt-minus-one", azure_disk("unzoned"), nodeAffinity=affinity), dry_run=True)

    def test_zoned_topology_stored_as_written(self, control_plane: ControlPlane, webhook: Webhook) -> None:
        """A provisioner's zoned PV (labels + affinity from `volume_topology`) is trusted and stored unchanged."""
        found, affinity = volume_topology("eastus-2", REGION)
        stored = create(control_plane, pv("topology", azure_disk("zoned"), nodeAffinity=affinity,
                                          metadata={"labels": found}), dry_run=True)
        assert stored["spec"]["nodeAffinity"] == affinity and stored["metadata"]["labels"] == found


class TestOutage:
    """With the webhook down, `failurePolicy: Ignore` admits PVs unlabelled; the library's patch repairs them."""

    def test_unlabelled_then_repaired(self, control_plane: ControlPlane, webhook: Webhook, cloud: FakeAzure) -> None:
        """A PV created during the outage is stored bare; `kubectl patch` with the webhook's own patch fixes it."""
        assert webhook.stop() == 0
        try:
            bare = create(control_plane, pv("outage", azure_disk("zoned")))
        finally:
            webhook.start()
        assert "labels" not in bare["metadata"] and "nodeAffinity" not in bare["spec"]
        # The repair: what the webhook would have patched, from the disk as ARM sees it.
        patch = review.patch_for(bare, provider_for(cloud).labels_for_volume(bare))
        control_plane.kubectl("patch", "pv", PREFIX + "outage", "--type=json", "-p", json.dumps(patch))
        repaired = control_plane.client.get(kube.PERSISTENT_VOLUMES, PREFIX + "outage")
        admitted = create(control_plane, pv("after-outage", azure_disk("zoned")), dry_run=True)
        assert repaired["metadata"]["labels"] == admitted["metadata"]["labels"] == region_zone("eastus-2")
        assert repaired["spec"]["nodeAffinity"] == admitted["spec"]["nodeAffinity"]

    def test_existing_affinity_is_immutable(self, control_plane: ControlPlane, webhook: Webhook,
                                            cloud: FakeAzure) -> None:
        """A PV that already had affinity terms can get its labels afterwards, but not the added requirements."""
        assert webhook.stop() == 0
        try:
            source = {"csi": {"driver": "disk.csi.azure.com", "volumeHandle": disk_uri(PREFIX + "csi")}}
            bare = create(control_plane, pv("outage-csi", source,
                                            nodeAffinity={"required": {"nodeSelectorTerms": [zone_term("eastus-1")]}}))
        finally:
            webhook.start()
        patch = review.patch_for(bare, provider_for(cloud).labels_for_volume(bare))
        refused = control_plane.kubectl("patch", "pv", PREFIX + "outage-csi", "--type=json", "-p", json.dumps(patch),
                                        check=False)
        assert refused.returncode == 1 and "field is immutable" in refused.stderr
        only_labels = [op for op in patch if op["path"].startswith("/metadata/")]
        control_plane.kubectl("patch", "pv", PREFIX + "outage-csi", "--type=json", "-p", json.dumps(only_labels))
        stored = control_plane.client.get(kube.PERSISTENT_VOLUMES, PREFIX + "outage-csi")
        assert stored["metadata"]["labels"] == region_zone("eastus-1")
        assert stored["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [zone_term("eastus-1")]
