"""Fuzzing the parsers with hypothesis: nothing escapes but the contract's errors; logs keep secrets."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudzones import errors
from cloudzones.simulation import pipeline, scenario, world
from providers.azure import topology_from_imds
from providers.azure.resource_ids import parse_disk_uri
from storageclass import StorageClassSpec

JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=10)
KEYS = st.sampled_from(["zone", "zones", "zoned", "skuName", "storageaccounttype", "kind", "cachingMode", "fsType",
                        "location", "resourceGroup", "LUN", "tags"])
VALUES = st.one_of(st.sampled_from(["true", "false", "eastus-1", "eastus-1,eastus-2", "0", "Premium_ZRS",
                                    "managed", "shared", "", "eastus-a"]), st.text(max_size=10))
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestParserFuzz:
    """Random input gives a value or a contract error, never a crash."""

    @FUZZ
    @given(st.dictionaries(KEYS, VALUES, max_size=5), st.sampled_from([None, "Immediate", "WaitForFirstConsumer", "x"]),
           st.one_of(st.none(), JSON))
    def test_storage_class(self, parameters: dict[str, str], mode: str | None, topologies: Any) -> None:
        """StorageClassSpec.from_manifest raises only InvalidStorageClass."""
        manifest: dict[str, Any] = {"metadata": {"name": "sc"}, "provisioner": "kubernetes.io/azure-disk",
                                    "parameters": parameters}
        if mode is not None:
            manifest["volumeBindingMode"] = mode
        if topologies is not None:
            manifest["allowedTopologies"] = topologies
        with contextlib.suppress(errors.InvalidStorageClass):
            StorageClassSpec.from_manifest(manifest, region="eastus")

    @FUZZ
    @given(JSON)
    def test_storage_class_any_shape(self, manifest: Any) -> None:
        """Even a manifest of the wrong shape only raises InvalidStorageClass."""
        with contextlib.suppress(errors.InvalidStorageClass):
            StorageClassSpec.from_manifest(manifest if isinstance(manifest, dict) else {"parameters": manifest})

    @FUZZ
    @given(st.one_of(JSON, st.fixed_dictionaries({"compute": st.dictionaries(
        st.sampled_from(["location", "zone", "platformFaultDomain", "platformSubFaultDomain"]), JSON, max_size=4)})))
    def test_imds_document(self, document: Any) -> None:
        """topology_from_imds raises only MetadataError or InvalidZone."""
        with contextlib.suppress(errors.MetadataError, errors.InvalidZone):
            topology_from_imds(document)

    @FUZZ
    @given(st.lists(st.sampled_from(["", "subscriptions", "s", "resourceGroups", "rg", "providers", "Microsoft.Compute",
                                     "disks", "d", "x/y"]), max_size=11))
    def test_disk_uri(self, parts: list[str]) -> None:
        """parse_disk_uri raises only InvalidResourceId."""
        with contextlib.suppress(errors.InvalidResourceId):
            parse_disk_uri("/".join(parts))

    @FUZZ
    @given(st.dictionaries(st.sampled_from(["region", "nodes", "claims", "storageClasses", "workload", "staticVolumes",
                                            "name"]), JSON, max_size=6))
    def test_scenario(self, data: dict[str, Any]) -> None:
        """Scenario validation raises only ScenarioError."""
        with contextlib.suppress(scenario.ScenarioError):
            scenario.parse(data)


class TestLogsKeepSecrets:
    """A full simulation at DEBUG logs no secret and no token."""

    def test_debug_simulation(self, caplog: pytest.LogCaptureFixture) -> None:
        """Neither the configured client secret nor the bearer token appears in any log record."""
        caplog.set_level(logging.DEBUG)
        for name in ("azure", "urllib3", "kubernetes", "cloudzones", "providers"):
            logging.getLogger(name).setLevel(logging.DEBUG)
        with world.running(scenario.load()) as sim:
            pipeline.run_all(sim, lambda message: None)
        text = "\n".join(record.getMessage() + str(record.__dict__) for record in caplog.records)
        assert len(caplog.records) > 100  # the simulation did log at DEBUG
        assert world.SIMULATED_SECRET not in text
        assert "fake-token" not in text
