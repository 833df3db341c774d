"""Tests for the node agent (own IMDS → own node) and the health/metrics server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cloudzones import errors, kube, labels
from cloudzones.services import nodeagent
from cloudzones.testing.azure import FakeImds
from cloudzones.testing.kubeapi import FakeKubeApi
from providers.azure import AzureConfig, AzureProvider
from tests.conftest import FakeClock


@pytest.fixture
def world() -> Iterator[tuple[FakeKubeApi, kube.KubeClient, FakeImds]]:
    """A fake API server with two nodes, and a FakeImds describing them."""
    imds = FakeImds()
    imds.add_machine("zoned", location="NorthEurope", zone="2", fault_domain=0)
    imds.add_machine("unzoned", location="northeurope", zone="", fault_domain=36)
    imds.start()
    with FakeKubeApi() as api, kube.KubeClient.for_host(api.url, sleep=lambda s: None) as client:
        for name in ("zoned", "unzoned"):
            api.create("nodes", {"metadata": {"name": name, "labels": {labels.ZONE: "stale"}}})
        yield api, client, imds
    imds.stop()


def agent_for(name: str, client: kube.KubeClient, imds: FakeImds) -> nodeagent.NodeAgent:
    """A node agent reading its own machine's IMDS (retry waits on a fake clock)."""
    clock = FakeClock()
    provider = AzureProvider(AzureConfig.from_mapping({}, environ={}), imds_url=imds.url_for(name), clock=clock,
                             sleep=clock.sleep)
    return nodeagent.NodeAgent(client, provider, name, rand=lambda: 1.0)


class TestNodeAgent:
    """The agent labels its own node and nothing else."""

    def test_labels_own_node(self, world: tuple[FakeKubeApi, kube.KubeClient, FakeImds]) -> None:
        """Zoned: <region>-<zone>; unzoned: fault domain plus the fault-domain label; second check sends no PATCH."""
        api, client, imds = world
        assert agent_for("zoned", client, imds).check_once() == "patched"
        unzoned = agent_for("unzoned", client, imds)
        assert unzoned.check_once() == "patched"
        assert api.get("nodes", "zoned")["metadata"]["labels"][labels.ZONE] == "northeurope-2"
        got = api.get("nodes", "unzoned")["metadata"]["labels"]
        assert got[labels.ZONE] == "36" and got[labels.FAULT_DOMAIN] == "36" and got[labels.REGION] == "northeurope"
        patches = api.count("patch", "nodes")
        assert unzoned.check_once() == "unchanged" and api.count("patch", "nodes") == patches
        assert imds.calls["unzoned"] == 1  # IMDS is read once per process

    def test_needs_node_name(self, world: tuple[FakeKubeApi, kube.KubeClient, FakeImds]) -> None:
        """No NODE_NAME is a configuration error."""
        _, client, _imds = world
        with pytest.raises(errors.ConfigError, match="NODE_NAME"):
            nodeagent.NodeAgent(client, object(), "")

    def test_run_retries_then_succeeds(self, world: tuple[FakeKubeApi, kube.KubeClient, FakeImds]) -> None:
        """An IMDS that fails past its budget → Event on the node and a retry; then the node is labelled."""
        api, client, imds = world
        agent = agent_for("zoned", client, imds)
        imds.fail_next(4, status=500)  # exactly one lookup's attempts
        waits: list[float] = []

        def fake_wait(seconds: float | None = None) -> bool:
            waits.append(seconds or 0.0)
            if len(waits) >= 2:
                agent.stop_event.set()
            return agent.stop_event.is_set()

        agent.stop_event.wait = fake_wait  # type: ignore[method-assign]
        agent.run()
        assert waits[0] == 2.0 and api.get("nodes", "zoned")["metadata"]["labels"][labels.ZONE] == "northeurope-2"
        events = api.list("events", namespace="default")
        assert [e["reason"] for e in events] == ["ZoneUnresolved"]

