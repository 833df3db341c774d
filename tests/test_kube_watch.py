"""Tests for watching through cloudzones.kube against the fake API server: events, bookmarks, 410, drops."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from cloudzones import errors, kube
from cloudzones.retry import RetryPolicy
from cloudzones.testing import FakeKubeApi


@pytest.fixture
def client(api: FakeKubeApi) -> Iterator[kube.KubeClient]:
    with kube.KubeClient.for_host(api.url, sleep=lambda _: None) as c:
        yield c


def _seen(stream: kube.WatchStream) -> list[tuple[str, str]]:
    return [(e.type, (e.object.get("metadata") or {}).get("name", "")) for e in stream]


class TestWatchEvents:
    """What a watch stream delivers."""

    def test_from_version(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """From a resourceVersion: the later changes, in order, then the stream ends when the server ends it."""
        api.create("nodes", {"metadata": {"name": "a"}})
        stream = client.watch(kube.NODES, resource_version=str(api.resource_version), timeout_seconds=30)
        api.create("nodes", {"metadata": {"name": "b"}})
        api.patch("nodes", "a", {"metadata": {"labels": {"x": "1"}}})
        api.delete("nodes", "b")
        api.drop_watches(graceful=True)
        assert _seen(stream) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]

    def test_history_replay(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Changes made before the watch but after its resourceVersion are replayed."""
        api.create("nodes", {"metadata": {"name": "a"}})
        start = str(api.resource_version)
        api.patch("nodes", "a", {"metadata": {"labels": {"x": "1"}}})
        stream = client.watch(kube.NODES, resource_version=start, timeout_seconds=30)
        api.drop_watches(graceful=True)
        events = list(stream)
        assert [(e.type, e.object["metadata"]["labels"]) for e in events] == [("MODIFIED", {"x": "1"})]
        assert events[0].resource_version == str(api.resource_version)

    def test_without_version(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Without a resourceVersion the stream starts with ADDED for every existing object."""
        api.create("nodes", {"metadata": {"name": "a"}})
        api.create("nodes", {"metadata": {"name": "b"}})
        stream = client.watch(kube.NODES, timeout_seconds=30)
        api.drop_watches(graceful=True)
        assert _seen(stream) == [("ADDED", "a"), ("ADDED", "b")]

    def test_selector_transitions(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """An object entering the selection is ADDED, leaving it is DELETED; others are not seen."""
        api.create("nodes", {"metadata": {"name": "a"}})
        api.create("nodes", {"metadata": {"name": "other"}})
        stream = client.watch(kube.NODES, resource_version=str(api.resource_version), label_selector="zone",
                              timeout_seconds=30)
        api.patch("nodes", "a", {"metadata": {"labels": {"zone": "1"}}})
        api.patch("nodes", "a", {"metadata": {"labels": {"zone": "2"}}})
        api.patch("nodes", "other", {"metadata": {"labels": {"unrelated": "x"}}})
        api.patch("nodes", "a", {"metadata": {"labels": {"zone": None}}})
        api.drop_watches(graceful=True)
        assert _seen(stream) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]

    def test_namespace(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A namespaced watch sees its namespace only; without a namespace it sees all."""
        start = str(api.resource_version)
        one = client.watch(kube.PODS, namespace="a", resource_version=start, timeout_seconds=30)
        every = client.watch(kube.PODS, resource_version=start, timeout_seconds=30)
        api.create("pods", {"metadata": {"name": "p", "namespace": "a"}})
        api.create("pods", {"metadata": {"name": "q", "namespace": "b"}})
        api.create("nodes", {"metadata": {"name": "n"}})
        api.drop_watches(graceful=True)
        assert _seen(one) == [("ADDED", "p")]
        assert _seen(every) == [("ADDED", "p"), ("ADDED", "q")]


class TestBookmarks:
    """BOOKMARK events carry the version a watcher has reached."""

    def test_on_request(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """bookmark() makes bookmark-enabled streams send the current version."""
        stream = client.watch(kube.NODES, resource_version=str(api.resource_version), timeout_seconds=30)
        api.create("pods", {"metadata": {"name": "p", "namespace": "a"}})  # moves the version, not a node event
        assert api.bookmark("nodes") == 1
        api.drop_watches(graceful=True)
        events = list(stream)
        assert [(e.type, e.resource_version) for e in events] == [("BOOKMARK", str(api.resource_version))]

    def test_not_without_asking(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A stream opened with bookmarks=False gets none."""
        stream = client.watch(kube.NODES, resource_version="0", timeout_seconds=30, bookmarks=False)
        assert api.bookmark() == 0
        api.drop_watches(graceful=True)
        assert list(stream) == []

    def test_timeout_ends_with_bookmark(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """timeoutSeconds ends the stream, after a last BOOKMARK."""
        start = time.monotonic()
        events = list(client.watch(kube.NODES, resource_version="0", timeout_seconds=1))
        assert 1 <= time.monotonic() - start < 5
        assert [e.type for e in events] == ["BOOKMARK"]

    def test_periodic(self) -> None:
        """With bookmark_interval set, streams send bookmarks on their own."""
        with FakeKubeApi(bookmark_interval=0.05) as server, kube.KubeClient.for_host(server.url) as c:
            stream = c.watch(kube.NODES, resource_version="0", timeout_seconds=30)
            for event in stream:
                assert event.type == "BOOKMARK"
                stream.stop()


class TestWatchFailures:
    """410 Gone, dropped streams and stopping."""

    def test_too_old(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A start older than the retained history is an ERROR 410, raised as KubeGone."""
        api.create("nodes", {"metadata": {"name": "a"}})
        api.patch("nodes", "a", {"metadata": {"labels": {"x": "1"}}})
        floor = api.compact()
        with pytest.raises(errors.KubeGone, match="too old resource version") as info:
            list(client.watch(kube.NODES, resource_version="1", timeout_seconds=30))
        assert info.value.status == 410 and info.value.reason == "Expired"
        api.drop_watches()  # a watch from the floor itself is fine
        stream = client.watch(kube.NODES, resource_version=str(floor), timeout_seconds=30)
        api.drop_watches(graceful=True)
        assert list(stream) == []

    def test_bounded_history(self) -> None:
        """The history keeps at most history_limit (+25%) events; older starts get 410."""
        with FakeKubeApi(history_limit=4) as server, kube.KubeClient.for_host(server.url) as c:
            server.create("nodes", {"metadata": {"name": "a"}})
            for i in range(10):
                server.patch("nodes", "a", {"metadata": {"labels": {"i": str(i)}}})
            with pytest.raises(errors.KubeGone):
                list(c.watch(kube.NODES, resource_version="1", timeout_seconds=30))
            stream = c.watch(kube.NODES, resource_version=str(server.resource_version - 3), timeout_seconds=30)
            server.drop_watches(graceful=True)
            assert len(list(stream)) == 3

    def test_expire_mid_stream(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """expire_watches ends open streams with ERROR 410, after the events they had."""
        stream = client.watch(kube.NODES, resource_version="0", timeout_seconds=30)
        api.create("nodes", {"metadata": {"name": "a"}})
        assert api.expire_watches() == 1
        seen = []
        with pytest.raises(errors.KubeGone):
            for event in stream:
                seen.append(event.type)
        assert seen == ["ADDED"]

    def test_injected_410(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """fail_next('watch', status=410) answers like an apiserver: a 200 stream holding one ERROR event."""
        api.fail_next("watch", "nodes", status=410)
        with pytest.raises(errors.KubeGone):
            list(client.watch(kube.NODES, resource_version="5", timeout_seconds=30))

    def test_watch_request_error(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """An HTTP error opening the watch raises from watch() itself (after the client's retries)."""
        api.fail_next("watch", "nodes", status=403)
        with pytest.raises(errors.KubeApiError) as info:
            client.watch(kube.NODES, timeout_seconds=30)
        assert info.value.status == 403

    def test_dropped(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A cut connection raises KubeApiError from the iteration."""
        stream = client.watch(kube.NODES, resource_version="0", timeout_seconds=30)
        assert api.drop_watches() == 1
        with pytest.raises(errors.KubeApiError, match="broke off") as info:
            list(stream)
        assert info.value.status is None

    def test_stop_from_another_thread(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """stop() ends an iteration blocked on a quiet stream, without an error."""
        stream = client.watch(kube.NODES, resource_version="0", timeout_seconds=60)
        done = threading.Event()

        def consume() -> None:
            list(stream)
            done.set()

        thread = threading.Thread(target=consume)
        thread.start()
        assert api.wait_for_watches(1, resource="nodes")
        stream.stop()
        assert done.wait(5) and stream.stopped
        thread.join()

    def test_server_stop_cuts_watches(self) -> None:
        """Stopping the server breaks open watches (the client sees a connection error)."""
        server = FakeKubeApi().start()
        with kube.KubeClient.for_host(server.url, retry=RetryPolicy(attempts=1)) as c:
            stream = c.watch(kube.NODES, resource_version="0", timeout_seconds=30)
            server.stop()
            with pytest.raises(errors.KubeApiError):
                list(stream)
