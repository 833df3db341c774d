"""Chaos: 1,000 nodes labelled while the API server and ARM misbehave; nothing is lost, nothing is wrong.

The controller is driven on the test's thread (reconcile loop + fake clock for retry timing), while
its informer runs on its own thread against the real client, so watch expiry and drops are real.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import kube, labels
from cloudzones.kube import informer
from cloudzones.retry import RetryPolicy
from cloudzones.services import controller
from cloudzones.testing.azure import FakeArm
from cloudzones.testing.kubeapi import FakeKubeApi
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from tests.conftest import FakeClock, FakeCredential

SUB = "44444444-0000-0000-0000-000000000000"
PID = f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute"


def inventory() -> tuple[FakeArm, dict[str, tuple[str, str]]]:
    """2 scale sets × 450 instances, 50 zoned and 50 unzoned standalone VMs; node → (providerID, zone label)."""
    arm = FakeArm(subscription=SUB, resource_group="rg", location="uksouth")
    want: dict[str, tuple[str, str]] = {}
    for ss in ("ssa", "ssb"):
        arm.add_scale_set(ss)
        for i in range(450):
            arm.add_scale_set_vm(ss, i, zone=str(i % 3 + 1))
            want[f"{ss}-{i}"] = (f"{PID}/virtualMachineScaleSets/{ss}/virtualMachines/{i}", f"uksouth-{i % 3 + 1}")
    for i in range(50):
        arm.add_vm(f"z{i}", zone=str(i % 3 + 1))
        want[f"z{i}"] = (f"{PID}/virtualMachines/z{i}", f"uksouth-{i % 3 + 1}")
        arm.add_vm(f"u{i}", zone=None, fault_domain=i % 4)
        want[f"u{i}"] = (f"{PID}/virtualMachines/u{i}", str(i % 4))
    return arm, want


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeArm, dict[str, tuple[str, str]]]]:
    """The inventory served over TLS."""
    arm, want = inventory()
    arm.start()
    yield arm, want
    arm.stop()


def node(name: str, provider_id: str, **extra: str) -> dict[str, Any]:
    """A Node manifest."""
    return {"metadata": {"name": name, "labels": dict(extra)}, "spec": {"providerID": provider_id}}


class TestChaos:
    """The labeller converges under injected faults."""

    def test_thousand_nodes_under_faults(self, served: tuple[FakeArm, dict[str, tuple[str, str]]]) -> None:
        """Every node ends with exactly the right labels; ARM calls stay within budget; nothing raises."""
        arm, want = served
        clock = FakeClock()
        assert arm.tls is not None
        config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "uksouth"}, environ={})
        provider = AzureProvider(config, credential=FakeCredential(), resource_manager_url=arm.url,
                                 connection_verify=str(arm.tls.ca_file), clock=clock, sleep=clock.sleep,
                                 arm_settings=ArmSettings(backoff_factor=0.0))
        names = sorted(want)
        with FakeKubeApi() as api, kube.KubeClient.for_host(api.url, sleep=lambda s: None, rand=lambda: 0.0) as client:
            # A tenth of the nodes start with wrong labels: a fault domain posing as a zone, a stale region.
            for index, name in enumerate(names[:700]):
                extra = {labels.ZONE: "0", labels.REGION: "westus"} if index % 10 == 0 else {}
                api.create("nodes", node(name, want[name][0], **extra))
            settings = controller.ControllerSettings(informer=informer.InformerSettings(
                backoff=RetryPolicy(base=0.01, cap=0.05), page_size=200))
            labeller = controller.NodeLabeler(client, provider, settings=settings, clock=clock)
            labeller.informer.start()
            assert labeller.informer.wait_for_sync(30)
            labeller.set_leading(True)
            api.fail_next("patch", "nodes", status=409, count=60)
            api.fail_next("patch", "nodes", status=500, count=25)
            arm.throttle_next(2, retry_after=20, match="virtualmachinescalesets/ssb")
            arm.fail_next(8, status=503, match="virtualmachines/z")
            faults_injected = 2 + 8
            try:
                for round_ in range(40):
                    outcome = labeller.process_one(timeout=2 if round_ < 3 else 0.3)
                    while outcome is not None:
                        outcome = labeller.process_one(timeout=0.3)
                    if round_ == 1:
                        assert api.wait_for_watches(1, resource="nodes")
                        api.expire_watches("nodes")  # 410 mid-watch
                        for name in names[700:850]:
                            api.create("nodes", node(name, want[name][0]))
                    if round_ == 2:
                        assert api.wait_for_watches(1, resource="nodes")
                        api.drop_watches("nodes")  # dropped stream
                        api.fail_next("list", "nodes", status=500, count=2)
                        api.fail_next("watch", "nodes", status=500, count=2)
                        for name in names[850:]:
                            api.create("nodes", node(name, want[name][0]))
                    clock.advance(30)
                    labeller.requeue_due()
                    if round_ > 3 and _all_right(api, want) and len(labeller.retries) == 0:
                        break
                wrong = _wrong(api, want)
                assert wrong == [], wrong[:5]
                # Budget: one list per scale set, one GET (+instance view) per VM, plus the injected failures and
                # the refetches they cause: far below one call per node.
                assert provider.arm_calls.total <= 2 + 100 * 2 + faults_injected * 4, provider.arm_calls
                failures = sum(sample.value for metric in labeller.metrics.registry.collect()
                               if metric.name == "cloudzones_resolve_errors" for sample in metric.samples
                               if sample.name.endswith("_total"))
                assert failures >= 2  # the injected ARM faults were seen, counted and retried
                assert labeller.informer.stats.expired >= 1
            finally:
                labeller.stop()


def _wrong(api: FakeKubeApi, want: dict[str, tuple[str, str]]) -> list[str]:
    problems = []
    seen = set()
    for item in api.list("nodes"):
        name = item["metadata"]["name"]
        seen.add(name)
        got = item["metadata"].get("labels", {})
        zone = want[name][1]
        fault_domain = "" if zone.startswith("uksouth-") else zone
        if (got.get(labels.ZONE), got.get(labels.BETA_ZONE), got.get(labels.REGION), got.get(labels.BETA_REGION),
                got.get(labels.FAULT_DOMAIN, "")) != (zone, zone, "uksouth", "uksouth", fault_domain):
            problems.append(f"{name}: {got}")
    problems += [f"{name}: missing" for name in set(want) - seen]
    return problems


def _all_right(api: FakeKubeApi, want: dict[str, tuple[str, str]]) -> bool:
    return not _wrong(api, want)
