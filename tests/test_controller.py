"""Integration tests of the node labeller: real controller, real kubernetes client, FakeKubeApi, FakeArm over TLS."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import kube, labels
from cloudzones.kube import leader
from cloudzones.services import controller
from cloudzones.testing.azure import FakeArm
from cloudzones.testing.kubeapi import FakeKubeApi
from providers.azure import AzureConfig, AzureProvider
from providers.azure.arm import ArmSettings
from tests.conftest import FakeClock, FakeCredential

SUB = "33333333-0000-0000-0000-000000000000"
PID = f"azure:///subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute"


@pytest.fixture(scope="module")
def arm() -> Iterator[FakeArm]:
    """A mixed inventory: 150 uniform VMSS instances (3 zones), 25 flex VMs, 15 zoned and 10 unzoned standalone VMs."""
    fake = FakeArm(subscription=SUB, resource_group="rg", location="westeurope")
    fake.add_scale_set("pool", prefix="aks-pool-vmss")
    for i in range(150):
        fake.add_scale_set_vm("pool", i, zone=str(i % 3 + 1))
    for i in range(25):
        fake.add_vm(f"flex-{i}", zone=str(i % 3 + 1), scale_set="flexpool")
    for i in range(15):
        fake.add_vm(f"vm-{i}", zone=str(i % 3 + 1))
    for i in range(10):
        fake.add_vm(f"old-{i}", zone=None, fault_domain=i % 3 if i < 8 else 36)
    fake.start()
    yield fake
    fake.stop()


def expected() -> dict[str, tuple[str, str]]:
    """provider ID → (zone label, fault-domain label or '') for the inventory above."""
    out = {f"{PID}/virtualMachineScaleSets/pool/virtualMachines/{i}": (f"westeurope-{i % 3 + 1}", "") for i in range(150)}
    out |= {f"{PID}/virtualMachines/flex-{i}": (f"westeurope-{i % 3 + 1}", "") for i in range(25)}
    out |= {f"{PID}/virtualMachines/vm-{i}": (f"westeurope-{i % 3 + 1}", "") for i in range(15)}
    for i in range(10):
        fd = str(i % 3 if i < 8 else 36)
        out[f"{PID}/virtualMachines/old-{i}"] = (fd, fd)
    return out


def node(name: str, provider_id: str, **extra_labels: str) -> dict[str, Any]:
    """A Node manifest."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/os": "linux", **extra_labels}},
            "spec": {"providerID": provider_id}}



@pytest.fixture
def client(api: FakeKubeApi) -> Iterator[kube.KubeClient]:
    """The real client against it, retry sleeps recorded instead of slept."""
    with kube.KubeClient.for_host(api.url, sleep=lambda s: None, rand=lambda: 0.5) as c:
        yield c


def provider(arm: FakeArm, clock: FakeClock) -> AzureProvider:
    """An AzureProvider against FakeArm over TLS."""
    assert arm.tls is not None
    config = AzureConfig.from_mapping({"subscriptionId": SUB, "resourceGroup": "rg", "location": "westeurope"}, environ={})
    return AzureProvider(config, credential=FakeCredential(), resource_manager_url=arm.url,
                         connection_verify=str(arm.tls.ca_file), clock=clock, sleep=clock.sleep,
                         arm_settings=ArmSettings(backoff_factor=0.0, polling_interval=0.0))


def drain(labeller: controller.NodeLabeler, *, first_timeout: float = 5.0) -> list[str]:
    """Reconcile queued nodes on this thread until the queue stays empty; returns the outcomes.

    Our own PATCHes come back through the watch as updates and reconcile as "unchanged"; those
    echoes are left out so the tests read as what the controller did.
    """
    outcomes = []
    outcome = labeller.process_one(timeout=first_timeout)
    while outcome is not None:
        outcomes.append(outcome)
        outcome = labeller.process_one(timeout=0.3)
    return [o for o in outcomes if o != "unchanged"]


def synced(labeller: controller.NodeLabeler, *, leading: bool = True) -> controller.NodeLabeler:
    """Start the labeller's informer and wait for its first list."""
    labeller.informer.start()
    assert labeller.informer.wait_for_sync(10)
    labeller.set_leading(leading)
    return labeller


def assert_labelled(api: FakeKubeApi) -> None:
    """Every node carries exactly the right topology labels."""
    want = expected()
    for item in api.list("nodes"):
        got = item["metadata"].get("labels", {})
        zone, fault_domain = want[item["spec"]["providerID"]]
        assert got.get(labels.ZONE) == zone and got.get(labels.BETA_ZONE) == zone, item["metadata"]["name"]
        assert got.get(labels.REGION) == "westeurope" and got.get(labels.BETA_REGION) == "westeurope"
        assert got.get(labels.FAULT_DOMAIN, "") == fault_domain


class TestNodeLabeler:
    """The controller labels nodes correctly, cheaply and robustly."""

    def test_200_mixed_nodes(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """200 VMSS, flex, standalone, zoned and unzoned nodes end fully and correctly labelled, within the ARM budget."""
        for index, pid in enumerate(expected()):
            api.create("nodes", node(f"n{index:03d}", pid))
        clock = FakeClock()
        prov = provider(arm, clock)
        labeller = synced(controller.NodeLabeler(client, prov))
        try:
            outcomes = drain(labeller)
            assert outcomes.count("patched") == 200
            assert_labelled(api)
            # One list for the scale set, one GET (+ instance view at most) per standalone/flex VM.
            assert prov.arm_calls.total <= 1 + 50
            # A second pass changes nothing and sends no PATCH.
            patches = api.count("patch", "nodes")
            labeller.enqueue_all()
            assert drain(labeller) == [] and api.count("patch", "nodes") == patches
        finally:
            labeller.stop()

    def test_fixes_wrong_labels_and_skips_unmanaged(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """A fault domain posing as a zone is corrected and our fault-domain label dropped; managed=false is left alone."""
        api.create("nodes", node("wrong", f"{PID}/virtualMachines/vm-0", **{labels.ZONE: "0", labels.FAULT_DOMAIN: "0"}))
        api.create("nodes", node("onprem", f"{PID}/virtualMachines/vm-1", **{labels.AZURE_MANAGED: "false"}))
        api.create("nodes", node("kind", "kind://docker/kind/kind-worker"))
        labeller = synced(controller.NodeLabeler(client, provider(arm, FakeClock())))
        try:
            outcomes = sorted(drain(labeller))
            fixed = api.get("nodes", "wrong")["metadata"]["labels"]
            assert fixed[labels.ZONE] == "westeurope-1" and labels.FAULT_DOMAIN not in fixed
            assert labels.ZONE not in api.get("nodes", "onprem")["metadata"]["labels"]
            assert outcomes == ["patched", "skipped: kubernetes.azure.com/managed=false", "skipped: not managed by this cloud"]
        finally:
            labeller.stop()

    def test_conflicts_and_errors_retried(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """409 on PATCH → fresh read and re-patch; 500s past the client's retries → retried later with backoff."""
        api.create("nodes", node("a", f"{PID}/virtualMachines/vm-2"))
        api.create("nodes", node("b", f"{PID}/virtualMachines/vm-3"))
        clock = FakeClock()
        labeller = controller.NodeLabeler(client, provider(arm, clock), clock=clock)
        synced(labeller)
        try:
            api.fail_next("patch", "nodes", status=409, count=1)
            api.fail_next("patch", "nodes", status=500, count=5)  # the client's own 5 attempts, all failing
            outcomes = drain(labeller)
            assert "retry" in outcomes
            clock.advance(5)
            assert labeller.requeue_due() >= 1
            drain(labeller, first_timeout=0.5)
            for name in ("a", "b"):
                assert api.get("nodes", name)["metadata"]["labels"][labels.ZONE].startswith("westeurope-")
        finally:
            labeller.stop()

    def test_unresolvable_node_gets_one_event(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """An unknown VM → Warning Event on the node (once per distinct failure), retried with backoff."""
        api.create("nodes", node("ghost", f"{PID}/virtualMachines/does-not-exist"))
        clock = FakeClock()
        labeller = synced(controller.NodeLabeler(client, provider(arm, clock), clock=clock))
        try:
            assert drain(labeller) == ["retry"]
            clock.advance(2)
            labeller.requeue_due()
            assert drain(labeller, first_timeout=0.5) == ["retry"]
            events = api.list("events", namespace="default")
            assert len(events) == 1 and events[0]["reason"] == "ZoneUnresolved"
            assert events[0]["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "ghost", "namespace": "", "uid": ""}
            assert labeller.retries.failures["ghost"] == 2
        finally:
            labeller.stop()

    def test_arm_throttle_honours_retry_after(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """A 429 from ARM schedules the node no sooner than Retry-After."""
        api.create("nodes", node("t", f"{PID}/virtualMachines/vm-4"))
        clock = FakeClock()
        labeller = synced(controller.NodeLabeler(client, provider(arm, clock), clock=clock))
        try:
            arm.throttle_next(1, retry_after=30, match="virtualMachines/vm-4")
            assert drain(labeller) == ["retry"]
            clock.advance(10)
            assert labeller.requeue_due() == 0
            clock.advance(21)
            assert labeller.requeue_due() == 1
            assert drain(labeller, first_timeout=0.5) == ["patched"]
        finally:
            labeller.stop()

    def test_watch_expiry_and_drop_lose_nothing(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """Nodes added around a 410 and a dropped watch are still labelled."""
        labeller = synced(controller.NodeLabeler(client, provider(arm, FakeClock())))
        try:
            assert api.wait_for_watches(1, resource="nodes")
            api.expire_watches("nodes")
            api.create("nodes", node("after-410", f"{PID}/virtualMachines/vm-5"))
            assert drain(labeller) == ["patched"]
            api.drop_watches("nodes")
            api.create("nodes", node("after-drop", f"{PID}/virtualMachines/vm-6"))
            assert drain(labeller) == ["patched"]
            assert api.get("nodes", "after-drop")["metadata"]["labels"][labels.ZONE] == "westeurope-1"
        finally:
            labeller.stop()


class TestNoConvoy:
    """Workers do not queue behind one scale-set list: the others go on, and come back when it is in."""

    def test_deferred_while_listed(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """Node B of a scale set being listed for node A is deferred at once and queued again after the list."""
        for i in (0, 1):
            api.create("nodes", node(f"aks-pool-vmss00000{i}", f"{PID}/virtualMachineScaleSets/pool/virtualMachines/{i}"))
        labeller = synced(controller.NodeLabeler(client, provider(arm, FakeClock())))
        held = arm.hold_next("GET", "/virtualmachinescalesets/pool/virtualmachines")
        lists = arm.calls[("GET", "scaleSetVMs")]
        first = labeller.queue.get(timeout=5)
        worker = threading.Thread(target=lambda: labeller.reconcile(first or ""), daemon=True)
        worker.start()
        assert held.reached.wait(10)
        second = labeller.queue.get(timeout=5)
        assert second is not None and second != first
        assert labeller.reconcile(second) == "deferred: its scale set is being listed"
        labeller.queue.done(second)
        assert second not in labeller.queue
        held.release()
        worker.join(10)
        labeller.queue.done(first or "")
        assert second in labeller.queue  # woken by the list's end
        assert drain(labeller) == ["patched"]
        assert arm.calls[("GET", "scaleSetVMs")] == lists + 1  # listed once, for both
        labeller.stop()


class TestPause:
    """Losing the Lease stops the writes, including the ones in flight, before the Lease goes."""

    def test_pause_waits_for_the_reconcile_in_flight(self, api: FakeKubeApi, client: kube.KubeClient,
                                                     arm: FakeArm) -> None:
        """pause() returns only once the worker's reconcile (held in ARM here) has finished."""
        api.create("nodes", node("aks-pool-vmss000003", f"{PID}/virtualMachineScaleSets/pool/virtualMachines/3"))
        labeller = synced(controller.NodeLabeler(client, provider(arm, FakeClock())))
        held = arm.hold_next("GET", "/virtualmachinescalesets/pool/virtualmachines")
        key = labeller.queue.get(timeout=5)
        worker = threading.Thread(target=lambda: (labeller.reconcile(key or ""), labeller.queue.done(key or "")),
                                  daemon=True)
        worker.start()
        assert held.reached.wait(10)
        paused: list[bool] = []
        pauser = threading.Thread(target=lambda: paused.append(labeller.pause(timeout=10)), daemon=True)
        pauser.start()
        pauser.join(0.3)
        assert pauser.is_alive()  # still waiting for the reconcile in flight
        held.release()
        pauser.join(10)
        assert paused == [True] and not labeller.active.is_set()
        labeller.stop()


class TestLeaderElection:
    """Only the Lease holder acts; a hand-over loses nothing."""

    def test_second_replica_idle_then_takes_over(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """Replica B does nothing while A holds the lease; after A releases it, B labels the new node."""
        api.create("nodes", node("n1", f"{PID}/virtualMachines/vm-7"))
        a = synced(controller.NodeLabeler(client, provider(arm, FakeClock())), leading=False)
        b = synced(controller.NodeLabeler(client, provider(arm, FakeClock())), leading=False)
        elector_a = leader.LeaderElector(client, name="cz", namespace="kube-system", identity="a",
                                         on_started_leading=lambda: a.set_leading(True))
        elector_b = leader.LeaderElector(client, name="cz", namespace="kube-system", identity="b",
                                         on_started_leading=lambda: b.set_leading(True))
        try:
            assert elector_a.try_acquire_or_renew() and not elector_b.try_acquire_or_renew()
            a.set_leading(True)
            assert drain(a) == ["patched"]
            api.create("nodes", node("n2", f"{PID}/virtualMachines/vm-8"))
            outcomes_b = drain(b, first_timeout=2)
            assert outcomes_b == ["skipped: not the leader"] and api.count("patch", "nodes") == 1
            a.set_leading(False)
            assert elector_a.release() and elector_b.try_acquire_or_renew()
            b.set_leading(True)
            drain(b, first_timeout=0.5)
            assert api.get("nodes", "n2")["metadata"]["labels"][labels.ZONE] == "westeurope-3"
        finally:
            a.stop()
            b.stop()


class TestAnnotatorHooks:
    """The controller feeds the pod annotator: node changes wake it, and node labels come from the cache."""

    def test_node_change_callback_and_labels(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """Adds and label updates call on_node_change with the node name; node_labels reads the cache."""
        seen: list[str] = []
        api.create("nodes", node("n-hook", f"{PID}/virtualMachines/vm-9"))
        labeller = synced(controller.NodeLabeler(client, provider(arm, FakeClock()), on_node_change=seen.append))
        try:
            assert seen == ["n-hook"]
            assert drain(labeller) == ["patched"]
            assert labeller.informer.wait_until(lambda _: len(seen) >= 2, 5)
            assert seen[-1] == "n-hook"
            assert (labeller.node_labels("n-hook") or {}).get(labels.ZONE) == "westeurope-1"
            assert labeller.node_labels("nobody") is None
        finally:
            labeller.stop()


class TestReadiness:
    """/readyz of the controller: not ready before the first list, nor while ARM refuses our credentials."""

    def test_credentials_refused_then_recovered(self, api: FakeKubeApi, client: kube.KubeClient, arm: FakeArm) -> None:
        """A 403 from ARM makes readiness name the refusal; the next successful lookup clears it."""
        api.create("nodes", node("a", f"{PID}/virtualMachines/vm-1"))
        clock = FakeClock()
        labeller = controller.NodeLabeler(client, provider(arm, clock), clock=clock)
        assert labeller.readiness() == "the node informer has not finished its first list"
        synced(labeller)
        try:
            arm.fail_next(1, status=403)
            assert drain(labeller) == ["retry"]
            assert labeller.readiness().startswith("every zone lookup fails for a configuration reason")
            clock.advance(5)
            labeller.requeue_due()
            assert drain(labeller, first_timeout=0.5) == ["patched"]
            assert labeller.readiness() == ""
        finally:
            labeller.stop()
