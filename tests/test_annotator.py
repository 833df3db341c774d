"""Tests for cloudzones.services.annotator: the real client against the fake API server, one pod at a time and running."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from cloudzones import errors, kube, labels
from cloudzones.kube import informer
from cloudzones.retry import RetryPolicy
from cloudzones.services import annotator
from cloudzones.testing import FakeKubeApi
from tests.conftest import FakeClock

SELECTOR = "cloudzones.io/zone-injection=enabled"
ZONED = {labels.ZONE: "eastus-2", labels.REGION: "eastus"}
WANTED = {labels.ZONE: "eastus-2", labels.REGION: "eastus", labels.POD_ZONES: "eastus-2_eastus"}
# What the annotator may ask of the API server: the verbs its RBAC rules grant (see deploy/).
ALLOWED_REQUESTS = {("list", "pods"), ("watch", "pods"), ("get", "pods"), ("patch", "pods"), ("get", "nodes"),
                    ("create", "events")}



@pytest.fixture
def client(api: FakeKubeApi) -> Iterator[kube.KubeClient]:
    with kube.KubeClient.for_host(api.url, sleep=lambda _: None, retry=RetryPolicy(attempts=2)) as c:
        yield c


def _node(api: FakeKubeApi, name: str = "n1", node_labels: dict[str, str] | None = None) -> None:
    api.create("nodes", {"metadata": {"name": name, "labels": ZONED if node_labels is None else node_labels}})


def _pod(api: FakeKubeApi, name: str = "p", *, node: str | None = "n1", selected: bool = True,
         annotations: dict[str, str] | None = None, namespace: str = "apps") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": {"cloudzones.io/zone-injection": "enabled" if selected else "no"}}
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "app"}]}
    if node:
        spec["nodeName"] = node
    return api.create("pods", {"metadata": metadata, "spec": spec})


def _annotations(api: FakeKubeApi, name: str = "p", namespace: str = "apps") -> dict[str, str]:
    return dict(api.get("pods", name, namespace=namespace)["metadata"].get("annotations") or {})


def _annotator(client: kube.KubeClient, clock: FakeClock | None = None, *, retry_base: float = 5.0,
               retry_max: float = 300.0, **settings: Any) -> annotator.PodZoneAnnotator:
    # rand=1.0 draws the top of every jitter range, so retry times are exact.
    settings["retry"] = RetryPolicy(base=retry_base, cap=retry_max)
    return annotator.PodZoneAnnotator(
        client, label_selector=SELECTOR, settings=annotator.AnnotatorSettings(**settings), rand=lambda: 1.0,
        record_event=annotator.event_recorder(client, instance="test-host",
                                              now=lambda: datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.timezone.utc)),
        informer_settings=informer.InformerSettings(resync_period=0, watch_timeout=30),
        **({"clock": clock} if clock else {}))


class TestRunOnce:
    """PodZoneAnnotator.run_once / reconcile on the caller's thread."""

    def test_annotates_bound_pod(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A bound pod gets zone, region and the combined value in one merge patch."""
        _node(api)
        _pod(api, annotations={"keep": "me"})
        zones = _annotator(client)
        assert zones.run_once("apps/p") is annotator.Outcome.ANNOTATED
        assert _annotations(api) == {"keep": "me", **WANTED}
        assert api.wait_for_requests(1, "patch", "pods")  # the fake logs a request just after answering it
        patches = [r for r in api.requests if r.verb == "patch"]
        assert [(r.path, r.content_type) for r in patches] == [
            ("/api/v1/namespaces/apps/pods/p", "application/merge-patch+json")]
        assert zones.stats.snapshot()["annotated"] == 1

    def test_second_run_changes_nothing(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Once annotated, another run sends no patch."""
        _node(api)
        _pod(api)
        zones = _annotator(client)
        zones.run_once("apps/p")
        assert zones.run_once("apps/p") is annotator.Outcome.UNCHANGED
        assert api.wait_for_requests(1, "patch", "pods") and api.count("patch", "pods") == 1

    def test_unbound_pod_untouched(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A pod without a node is skipped: no node read, no patch, no retry."""
        _node(api)
        _pod(api, node=None)
        zones = _annotator(client)
        assert zones.run_once("apps/p") is annotator.Outcome.SKIPPED
        assert api.count("patch") == api.count("get", "nodes") == 0
        assert zones.requeue_due() is None

    def test_existing_annotation_never_overwritten(self, api: FakeKubeApi, client: kube.KubeClient,
                                                   caplog: pytest.LogCaptureFixture) -> None:
        """A different zone annotation is left alone and logged once; the other annotations are added."""
        _node(api)
        _pod(api, annotations={labels.ZONE: "westus-1"})
        zones = _annotator(client)
        assert zones.run_once("apps/p") is annotator.Outcome.ANNOTATED
        assert _annotations(api) == {**WANTED, labels.ZONE: "westus-1"}
        assert zones.run_once("apps/p") is annotator.Outcome.UNCHANGED
        assert api.wait_for_requests(1, "patch", "pods") and api.count("patch", "pods") == 1
        assert [r.getMessage() for r in caplog.records if "leaving it" in r.getMessage()] == [
            "pod apps/p already has the annotation topology.kubernetes.io/zone='westus-1'; leaving it "
            "(node 'n1' says 'eastus-2')"]
        assert zones.stats.snapshot()["conflicts"] == 1

    def test_several_keys_joined(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Configured keys are copied one by one and joined with '_' in their order."""
        _node(api, node_labels={**ZONED, "example.com/rack": "r7"})
        _pod(api)
        zones = _annotator(client, keys=("example.com/rack", labels.ZONE), combined_annotation="example.com/where")
        zones.run_once("apps/p")
        assert _annotations(api) == {"example.com/rack": "r7", labels.ZONE: "eastus-2", "example.com/where": "r7_eastus-2"}

    def test_missing_label_event_then_annotation(self, api: FakeKubeApi, client: kube.KubeClient,
                                                 clock: FakeClock) -> None:
        """A node without a zone gets one Warning Event on the pod; once labelled, the pod is annotated."""
        _node(api, node_labels={labels.REGION: "eastus"})
        uid = _pod(api)["metadata"]["uid"]
        zones = _annotator(client, clock)
        assert zones.run_once("apps/p") is annotator.Outcome.WAITING
        assert zones.run_once("apps/p") is annotator.Outcome.WAITING
        events = api.list("events", namespace="apps")
        assert len(events) == 1
        event = events[0]
        assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "apps",
                                           "uid": uid}
        assert (event["type"], event["reason"]) == ("Warning", "TopologyLabelMissing")
        assert '"n1"' in event["message"] and labels.ZONE in event["message"]
        assert event["source"] == {"component": annotator.COMPONENT, "host": "test-host"}
        assert event["lastTimestamp"] in ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00+00:00")
        assert api.count("patch") == 0 and _annotations(api) == {}
        assert zones.waiting() == {"apps/p": "n1"}
        api.patch("nodes", "n1", {"metadata": {"labels": {labels.ZONE: "eastus-2"}}})
        assert zones.run_once("apps/p") is annotator.Outcome.ANNOTATED
        assert _annotations(api) == WANTED
        assert zones.waiting() == {}
        assert zones.stats.snapshot()["events"] == 1

    def test_retry_backoff(self, api: FakeKubeApi, client: kube.KubeClient, clock: FakeClock) -> None:
        """A waiting pod is queued again after retry_base, then twice as long, capped at retry_max."""
        _node(api, node_labels={})
        _pod(api)
        zones = _annotator(client, clock, retry_base=5.0, retry_max=12.0)
        delays = []
        for _ in range(4):
            zones.run_once("apps/p")
            delays.append(zones.requeue_due())
            clock.advance(delays[-1] or 0)
            assert zones.requeue_due() is None
            assert zones.queue.get(timeout=0) == "apps/p"
            zones.queue.done("apps/p")
        assert delays == [5.0, 10.0, 12.0, 12.0]

    def test_unknown_node_waits_without_event(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A pod bound to a node the API does not know waits, with no Event; node_changed queues it."""
        _pod(api, node="ghost")
        zones = _annotator(client)
        assert zones.run_once("apps/p") is annotator.Outcome.WAITING
        assert api.count("create", "events") == 0
        assert zones.node_changed("other") == 0
        assert zones.node_changed("ghost") == 1
        assert zones.queue.get(timeout=0) == "apps/p"

    def test_pod_gone(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A pod that no longer exists is forgotten, whether the GET or the patch says so."""
        _node(api)
        zones = _annotator(client)
        assert zones.run_once("apps/missing") is annotator.Outcome.GONE
        stale = {"metadata": {"name": "gone", "namespace": "apps"}, "spec": {"nodeName": "n1"}}
        assert zones.reconcile(stale) is annotator.Outcome.GONE
        assert zones.stats.snapshot()["errors"] == 0

    def test_patch_failure_retried(self, api: FakeKubeApi, client: kube.KubeClient, clock: FakeClock) -> None:
        """A failing patch counts an error and schedules a retry, which then succeeds."""
        _node(api)
        _pod(api)
        zones = _annotator(client, clock, retry_base=1.0)
        api.fail_next("patch", "pods", status=500, count=2)
        assert zones.run_once("apps/p") is annotator.Outcome.FAILED
        assert zones.stats.snapshot()["errors"] == 1
        clock.advance(1.0)
        zones.requeue_due()
        assert zones.queue.get(timeout=0) == "apps/p"
        assert zones.run_once("apps/p") is annotator.Outcome.ANNOTATED

    def test_event_failure_tried_again(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """When the Event cannot be created the next run creates it."""
        _node(api, node_labels={labels.ZONE: "eastus-1"})
        _pod(api)
        zones = _annotator(client)
        api.fail_next("create", "events", status=403)
        assert zones.run_once("apps/p") is annotator.Outcome.WAITING
        assert api.list("events", namespace="apps") == []
        zones.run_once("apps/p")
        assert len(api.list("events", namespace="apps")) == 1
        assert zones.stats.snapshot()["errors"] == 1

    def test_node_read_failure(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A node read that fails (not 404) is FAILED, not WAITING, and sends no patch."""
        _node(api)
        _pod(api)
        api.fail_next("get", "nodes", status=500, count=2)
        assert _annotator(client).run_once("apps/p") is annotator.Outcome.FAILED
        assert api.count("patch") == 0

    def test_node_labels_callable(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A node_labels callable (the controller's cache) replaces the node GET."""
        _pod(api)
        asked: list[str] = []

        def cached(name: str) -> dict[str, str]:
            asked.append(name)
            return {labels.ZONE: "eastus-3", labels.REGION: "eastus"}

        zones = annotator.PodZoneAnnotator(client, label_selector=SELECTOR, node_labels=cached,
                                           record_event=lambda *a: None)
        assert zones.run_once("apps/p") is annotator.Outcome.ANNOTATED
        assert asked == ["n1"] and api.count("get", "nodes") == 0
        assert _annotations(api)[labels.POD_ZONES] == "eastus-3_eastus"

    @pytest.mark.parametrize(("selector", "settings", "match"), [
        ("  ", {}, "non-empty label selector"),
        (SELECTOR, {"workers": 0}, "at least one worker"),
        (SELECTOR, {"keys": ()}, "at least one node label key"),
    ])
    def test_bad_configuration(self, client: kube.KubeClient, selector: str, settings: dict[str, Any],
                               match: str) -> None:
        """An empty selector, no workers or no keys are refused with a ConfigError."""
        with pytest.raises(errors.ConfigError, match=match):
            annotator.PodZoneAnnotator(client, label_selector=selector, settings=annotator.AnnotatorSettings(**settings))


class TestRunning:
    """PodZoneAnnotator started: informer, workers and retry timer in threads."""

    def test_pod_bound_later(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """An unbound pod is left alone until it is bound, then annotated; stop ends every thread."""
        _node(api)
        _pod(api)  # bound already: annotated at once
        _pod(api, "later", node=None)
        zones = _annotator(client)
        zones.start()
        try:
            assert zones.wait_for_sync(5)
            assert api.wait_for_requests(1, "patch", "pods")
            assert _annotations(api, "later") == {}
            api.patch("pods", "later", {"spec": {"nodeName": "n1"}}, namespace="apps")
            assert api.wait_for_requests(2, "patch", "pods")
            assert _annotations(api, "later") == WANTED
        finally:
            zones.stop()
        assert {(r.verb, r.resource) for r in api.requests} <= ALLOWED_REQUESTS
        assert all(not t.is_alive() for t in zones._threads)

    def test_selector_respected(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Pods not matching the selector, in any namespace, are never read, patched or reported."""
        _node(api)
        _node(api, "bare", node_labels={})
        _pod(api, "other", selected=False)
        _pod(api, "other-bare", node="bare", selected=False, namespace="ops")
        _pod(api, "chosen", namespace="ops")
        zones = _annotator(client)
        zones.start()
        try:
            assert api.wait_for_requests(1, "patch", "pods")
        finally:
            zones.stop()
        assert [r.path for r in api.requests if r.verb == "patch"] == ["/api/v1/namespaces/ops/pods/chosen"]
        assert _annotations(api, "other") == {} and _annotations(api, "other-bare", "ops") == {}
        assert api.count("create", "events") == 0
        assert [r.query.get("labelSelector") for r in api.requests if r.verb in ("list", "watch")] == [
            SELECTOR] * len([r for r in api.requests if r.verb in ("list", "watch")])

    def test_label_appears_later(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A node lacking the zone gets an Event on the pod; once labelled and reported, the pod is annotated."""
        _node(api, node_labels={labels.REGION: "eastus"})
        _pod(api)
        zones = _annotator(client, retry_base=600.0)
        zones.start()
        try:
            assert api.wait_for_requests(1, "create", "events")
            api.patch("nodes", "n1", {"metadata": {"labels": {labels.ZONE: "eastus-2"}}})
            zones.node_changed("n1")
            assert api.wait_for_requests(1, "patch", "pods")
        finally:
            zones.stop()
        assert _annotations(api) == WANTED
        assert [e["reason"] for e in api.list("events", namespace="apps")] == ["TopologyLabelMissing"]

    def test_retry_timer_requeues(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Without node_changed, the retry timer brings the pod back once the label is there."""
        _node(api, node_labels={labels.REGION: "eastus"})
        _pod(api)
        zones = _annotator(client, retry_base=0.05, retry_max=0.05)
        zones.start()
        try:
            assert api.wait_for_requests(1, "create", "events")
            api.patch("nodes", "n1", {"metadata": {"labels": {labels.ZONE: "eastus-2"}}})
            assert api.wait_for_requests(1, "patch", "pods")
        finally:
            zones.stop()
        assert _annotations(api) == WANTED

    def test_restart(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """After stop, start runs again with a fresh queue and informer (a new leadership term)."""
        _node(api)
        zones = _annotator(client)
        zones.start()
        zones.stop()
        _pod(api)
        zones.start()
        try:
            assert api.wait_for_requests(1, "patch", "pods")
        finally:
            zones.stop()
        assert _annotations(api) == WANTED
