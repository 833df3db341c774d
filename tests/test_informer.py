"""Tests for the list+watch informer and the key queue, against the fake API server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cloudzones import kube
from cloudzones.kube import informer, workqueue
from cloudzones.retry import RetryPolicy
from cloudzones.testing import FakeKubeApi

Projected = dict[str, Any]


def _project(node: dict[str, Any]) -> Projected:
    """What a labeler keeps of a node."""
    return {"name": node["metadata"]["name"], "labels": dict(node["metadata"].get("labels") or {})}


class Recorder:
    """Callbacks that record deliveries and let a test wait for them."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.calls: list[tuple[Any, ...]] = []

    def _push(self, call: tuple[Any, ...]) -> None:
        with self.cond:
            self.calls.append(call)
            self.cond.notify_all()

    def add(self, obj: Projected) -> None:
        self._push(("add", obj["name"]))

    def update(self, old: Projected, new: Projected) -> None:
        self._push(("update", new["name"], old == new))

    def delete(self, obj: Projected) -> None:
        self._push(("delete", obj["name"]))

    def wait(self, predicate: Callable[[list[tuple[Any, ...]]], bool], timeout: float = 5.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self.calls), timeout=timeout)

    def wait_count(self, count: int) -> bool:
        return self.wait(lambda calls: len(calls) >= count)


class Sleeper:
    """An injected sleep: records each delay and, when gated, blocks until the test opens the gate."""

    def __init__(self, *, gated: bool = False) -> None:
        self.delays: list[float] = []
        self._cond = threading.Condition()
        self._open = not gated

    def __call__(self, seconds: float) -> None:
        with self._cond:
            self.delays.append(seconds)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._open, timeout=10)

    def wait_calls(self, count: int, timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.delays) >= count, timeout=timeout)

    def open(self) -> None:
        with self._cond:
            self._open = True
            self._cond.notify_all()



@pytest.fixture
def client(api: FakeKubeApi) -> Iterator[kube.KubeClient]:
    with kube.KubeClient.for_host(api.url, sleep=lambda _: None, retry=RetryPolicy(attempts=1)) as c:
        yield c


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def make(client: kube.KubeClient, recorder: Recorder) -> Iterator[Callable[..., informer.Informer[Projected]]]:
    """Build (and afterwards stop) informers over nodes with the recorder's callbacks."""
    made: list[informer.Informer[Projected]] = []

    def build(**options: Any) -> informer.Informer[Projected]:
        options.setdefault("rand", lambda: 0.5)
        options.setdefault("sleep", Sleeper())
        inf = informer.Informer(client, kube.NODES, project=_project, on_add=recorder.add,
                                on_update=recorder.update, on_delete=recorder.delete, **options)
        made.append(inf)
        return inf

    yield build
    for inf in made:
        inf.stop()


class TestInformer:
    """List, then watch, delivering what changed."""

    def test_initial_list(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]],
                          recorder: Recorder) -> None:
        """The first list fills the cache with projections and delivers adds; synced is set."""
        api.create("nodes", {"metadata": {"name": "a", "labels": {"z": "1"}}, "status": {"big": "x" * 1000}})
        api.create("nodes", {"metadata": {"name": "b"}})
        inf = make()
        inf.start()
        assert inf.wait_for_sync(5)
        assert inf.get("a") == {"name": "a", "labels": {"z": "1"}}
        assert inf.keys() == ["a", "b"] and len(inf) == 2
        assert recorder.calls == [("add", "a"), ("add", "b")]
        assert inf.resource_version == str(api.resource_version)

    def test_lists_page_by_page(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """Each page is projected before the next is fetched, so whole objects never pile up; nothing is missed."""
        for name in "abcde":
            api.create("nodes", {"metadata": {"name": name}})
        lists_seen: list[int] = []

        def project(node: dict[str, Any]) -> Projected:
            lists_seen.append(api.count("list", "nodes"))
            return _project(node)

        inf = informer.Informer(client, kube.NODES, project=project, settings=informer.InformerSettings(page_size=2))
        inf.start()
        try:
            assert inf.wait_for_sync(5)
            assert lists_seen == [1, 1, 2, 2, 3] and inf.keys() == ["a", "b", "c", "d", "e"]
            assert inf.resource_version == str(api.resource_version)
        finally:
            inf.stop()

    def test_first_list_delivers_each_page(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """On the first list a page's adds are delivered before the next page is asked for (workers start early)."""
        for name in "abcde":
            api.create("nodes", {"metadata": {"name": name}})
        delivered: list[tuple[str, int, bool]] = []
        inf: informer.Informer[Projected] = informer.Informer(
            client, kube.NODES, project=_project, settings=informer.InformerSettings(page_size=2),
            on_add=lambda obj: delivered.append((obj["name"], api.count("list", "nodes"), inf.synced.is_set())))
        inf.start()
        try:
            assert inf.wait_for_sync(5)
            assert delivered == [("a", 1, False), ("b", 1, False), ("c", 2, False), ("d", 2, False), ("e", 3, False)]
        finally:
            inf.stop()

    def test_watch_changes(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]],
                           recorder: Recorder) -> None:
        """Creates, label changes and deletes after the list arrive as add, update, delete."""
        api.create("nodes", {"metadata": {"name": "a"}})
        inf = make()
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        api.create("nodes", {"metadata": {"name": "b"}})
        api.patch("nodes", "a", {"metadata": {"labels": {"z": "2"}}})
        api.delete("nodes", "b")
        assert recorder.wait_count(4)
        assert recorder.calls == [("add", "a"), ("add", "b"), ("update", "a", False), ("delete", "b")]
        assert inf.get("a") == {"name": "a", "labels": {"z": "2"}} and inf.get("b") is None
        watch = next(r for r in api.requests if r.verb == "watch")
        assert watch.query["allowWatchBookmarks"] == "true" and watch.query["resourceVersion"] == "1"

    def test_unchanged_projection_not_delivered(self, api: FakeKubeApi,
                                                make: Callable[..., informer.Informer[Projected]],
                                                recorder: Recorder) -> None:
        """A change outside the projection (a status heartbeat) delivers nothing."""
        api.create("nodes", {"metadata": {"name": "a"}, "status": {"beat": 0}})
        inf = make()
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        for beat in range(1, 4):
            api.patch("nodes", "a", {"status": {"beat": beat}})
        api.patch("nodes", "a", {"metadata": {"labels": {"z": "1"}}})
        assert recorder.wait_count(2)
        assert recorder.calls == [("add", "a"), ("update", "a", False)]
        assert inf.stats.events == 4

    def test_selector(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]],
                      recorder: Recorder) -> None:
        """With a label selector, an object leaving the selection is delivered as a delete."""
        api.create("nodes", {"metadata": {"name": "a", "labels": {"managed": "yes"}}})
        api.create("nodes", {"metadata": {"name": "b"}})
        inf = make(label_selector="managed")
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        api.patch("nodes", "a", {"metadata": {"labels": {"managed": None}}})
        assert recorder.wait_count(2)
        assert recorder.calls == [("add", "a"), ("delete", "a")]

    def test_bookmarks_advance_version(self, api: FakeKubeApi,
                                       make: Callable[..., informer.Informer[Projected]]) -> None:
        """A BOOKMARK moves resource_version on without delivering anything."""
        inf = make()
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        api.create("pods", {"metadata": {"name": "p", "namespace": "x"}})
        api.bookmark()
        assert inf.wait_until(lambda i: i.resource_version == str(api.resource_version), timeout=5)
        assert inf.stats.bookmarks == 1 and inf.stats.events == 0


class TestRecovery:
    """410 Gone, dropped watches, errors and backoff."""

    def test_relist_after_410_loses_nothing(self, api: FakeKubeApi,
                                             make: Callable[..., informer.Informer[Projected]],
                                             recorder: Recorder) -> None:
        """Changes made while the watch was down and the history was compacted arrive through a relist."""
        api.create("nodes", {"metadata": {"name": "a"}})
        api.create("nodes", {"metadata": {"name": "b"}})
        sleeper = Sleeper(gated=True)
        inf = make(sleep=sleeper)
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        api.drop_watches()
        assert sleeper.wait_calls(1)  # the informer is backing off after the broken stream
        api.delete("nodes", "a")
        api.create("nodes", {"metadata": {"name": "c"}})
        api.patch("nodes", "b", {"metadata": {"labels": {"z": "1"}}})
        api.compact()
        sleeper.open()
        assert recorder.wait_count(5)
        assert recorder.calls[2:] == [("delete", "a"), ("update", "b", False), ("add", "c")]
        assert (inf.stats.lists, inf.stats.expired, inf.stats.errors) == (2, 1, 1)
        assert inf.keys() == ["b", "c"]

    def test_resume_after_drop_without_relist(self, api: FakeKubeApi,
                                              make: Callable[..., informer.Informer[Projected]],
                                              recorder: Recorder) -> None:
        """After a dropped stream the watch resumes from the last version: no relist, nothing lost."""
        api.create("nodes", {"metadata": {"name": "a"}})
        sleeper = Sleeper(gated=True)
        inf = make(sleep=sleeper)
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        api.drop_watches()
        assert sleeper.wait_calls(1)
        api.create("nodes", {"metadata": {"name": "b"}})
        sleeper.open()
        assert recorder.wait_count(2)
        assert recorder.calls == [("add", "a"), ("add", "b")] and inf.stats.lists == 1
        assert sleeper.delays == [0.5]  # ceiling 1 s, full jitter draws half with rand 0.5

    def test_expired_mid_stream(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]],
                                recorder: Recorder) -> None:
        """An ERROR 410 on the open stream makes the informer list again at once."""
        api.create("nodes", {"metadata": {"name": "a"}})
        sleeper = Sleeper()
        inf = make(sleep=sleeper)
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        api.expire_watches()
        assert api.wait_for_requests(2, "list", "nodes")
        api.create("nodes", {"metadata": {"name": "b"}})
        assert recorder.wait_count(2)
        assert sleeper.delays == [] and inf.stats.expired == 1

    def test_repeated_410_backs_off(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]],
                                    recorder: Recorder) -> None:
        """A 410 right after a fresh list is not retried in a tight loop."""
        api.fail_next("watch", "nodes", status=410, count=2)
        sleeper = Sleeper()
        inf = make(sleep=sleeper)
        inf.start()
        assert api.wait_for_requests(3, "list", "nodes") and api.wait_for_watches(1)
        assert sleeper.delays == [0.5] and inf.stats.expired == 2

    def test_backoff_with_jitter(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]]) -> None:
        """Failing lists back off exponentially with full jitter, then the informer syncs."""
        api.fail_next("list", "nodes", status=500, count=3)
        sleeper = Sleeper()
        inf = make(sleep=sleeper, settings=informer.InformerSettings(backoff=RetryPolicy(base=2)))
        inf.start()
        assert inf.wait_for_sync(5)
        assert sleeper.delays == [1.0, 2.0, 4.0] and inf.stats.errors == 3

    def test_backoff_cap_and_retry_after(self, api: FakeKubeApi,
                                         make: Callable[..., informer.Informer[Projected]]) -> None:
        """The backoff ceiling stops growing at the cap; a Retry-After is waited out in full."""
        api.fail_next("list", "nodes", status=500, count=3)
        api.fail_next("list", "nodes", status=429, retry_after=7)
        sleeper = Sleeper()
        inf = make(sleep=sleeper, rand=lambda: 1.0,
                   settings=informer.InformerSettings(backoff=RetryPolicy(base=2, cap=3)))
        inf.start()
        assert inf.wait_for_sync(5)
        assert sleeper.delays == [2, 3, 3, 7]

    def test_handler_errors_do_not_stop_it(self, api: FakeKubeApi, client: kube.KubeClient,
                                           recorder: Recorder) -> None:
        """A callback that raises is logged and counted; later deliveries still happen."""
        api.create("nodes", {"metadata": {"name": "bad"}})

        def add(obj: Projected) -> None:
            if obj["name"] == "bad":
                raise RuntimeError("boom")
            recorder.add(obj)

        inf = informer.Informer(client, kube.NODES, project=_project, on_add=add)
        inf.start()
        try:
            assert inf.wait_for_sync(5) and api.wait_for_watches(1)
            api.create("nodes", {"metadata": {"name": "good"}})
            assert recorder.wait_count(1) and inf.stats.handler_errors == 1
        finally:
            inf.stop()


    def test_projection_errors_back_off(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """A projection that raises is logged and retried with backoff instead of killing the thread."""
        api.create("nodes", {"metadata": {"name": "a"}})
        broken = [True]

        def project(node: dict[str, Any]) -> Projected:
            if broken[0]:
                raise KeyError("spec")
            return _project(node)

        sleeper = Sleeper(gated=True)
        inf = informer.Informer(client, kube.NODES, project=project, sleep=sleeper, rand=lambda: 0.0)
        thread = inf.start()
        try:
            assert sleeper.wait_calls(1) and thread.is_alive() and inf.stats.errors == 1
            broken[0] = False
            sleeper.open()
            assert inf.wait_for_sync(5) and inf.keys() == ["a"]
        finally:
            inf.stop()


class TestResyncAndStop:
    """Periodic resync with an injected clock; stopping."""

    def test_resync(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]],
                    recorder: Recorder) -> None:
        """After resync_period (by the injected clock) every cached object is delivered again as an update."""
        now = [1000.0]
        api.create("nodes", {"metadata": {"name": "a"}})
        api.create("nodes", {"metadata": {"name": "b"}})
        inf = make(clock=lambda: now[0], settings=informer.InformerSettings(resync_period=60))
        inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        now[0] += 61
        api.bookmark()  # wakes the watch loop, which notices the clock
        assert recorder.wait_count(4)
        assert recorder.calls[2:] == [("update", "a", True), ("update", "b", True)]
        assert inf.stats.resyncs == 1 and inf.stats.lists == 1
        watch = next(r for r in api.requests if r.verb == "watch")
        assert watch.query["timeoutSeconds"] == "60"

    def test_queue(self, api: FakeKubeApi, client: kube.KubeClient) -> None:
        """With a queue, every delivery queues the object's key once."""
        queue = workqueue.KeyQueue()
        api.create("pods", {"metadata": {"name": "p", "namespace": "ns"}})
        inf = informer.Informer(client, kube.PODS, queue=queue)
        inf.start()
        try:
            assert inf.wait_for_sync(5) and api.wait_for_watches(1)
            api.patch("pods", "p", {"metadata": {"labels": {"a": "b"}}}, namespace="ns")
            api.create("pods", {"metadata": {"name": "q", "namespace": "ns"}})
            assert queue.get(timeout=5) == "ns/p"
            assert queue.get(timeout=5) == "ns/q"
        finally:
            inf.stop()

    def test_stop_is_prompt(self, api: FakeKubeApi, make: Callable[..., informer.Informer[Projected]]) -> None:
        """stop() ends the thread while its watch is open and quiet."""
        inf = make()
        thread = inf.start()
        assert inf.wait_for_sync(5) and api.wait_for_watches(1)
        inf.stop(timeout=5)
        assert not thread.is_alive()

    def test_object_key(self) -> None:
        """Keys are namespace/name, or name for cluster-scoped objects."""
        assert informer.object_key({"metadata": {"name": "p", "namespace": "ns"}}) == "ns/p"
        assert informer.object_key({"metadata": {"name": "n"}}) == "n"


class TestKeyQueue:
    """KeyQueue deduplicates and never hands one key to two workers."""

    def test_dedup_and_order(self) -> None:
        """A key waits once however often it is added; keys come out in order."""
        queue = workqueue.KeyQueue()
        for key in ("a", "b", "a", "c", "b"):
            queue.add(key)
        assert len(queue) == 3 and "a" in queue
        assert [queue.get(timeout=0), queue.get(timeout=0), queue.get(timeout=0)] == ["a", "b", "c"]
        assert queue.get(timeout=0) is None

    def test_re_add_while_processing(self) -> None:
        """A key added while being processed comes back after done(), not before."""
        queue = workqueue.KeyQueue()
        queue.add("a")
        assert queue.get(timeout=0) == "a"
        queue.add("a")
        assert queue.get(timeout=0) is None
        queue.done("a")
        assert queue.get(timeout=0) == "a"
        queue.done("a")
        assert len(queue) == 0

    def test_shutdown(self) -> None:
        """shutdown wakes a blocked get, which returns None; later adds are ignored."""
        queue = workqueue.KeyQueue()
        got: list[str | None] = []
        thread = threading.Thread(target=lambda: got.append(queue.get()))
        thread.start()
        queue.shutdown()
        thread.join(5)
        queue.add("x")
        assert got == [None] and len(queue) == 0
