"""`FakeKubeApi`: an in-memory Kubernetes API server on 127.0.0.1, in a background thread.

Tests point the real ``kubernetes`` client at ``api.url`` and drive the same HTTP the client
speaks to a cluster, while setting up objects, injecting faults and reading the request log
in-process::

    with FakeKubeApi() as api:
        api.create("nodes", {"metadata": {"name": "n1", "labels": {"a": "b"}}})
        client = cloudzones.kube.KubeClient.for_host(api.url)
        api.fail_next("patch", "nodes", status=409)       # the next node PATCH gets a Conflict
        ...
        assert api.count("patch", "nodes") == 2

Served: nodes, persistentvolumes, storageclasses (cluster-scoped); persistentvolumeclaims, pods,
events, coordination.k8s.io/v1 leases (namespaced); verbs get, list, watch, create, update, patch
(merge, strategic merge as the API types declare it, JSON patch), delete, and the ``/status``
subresource where the resource has one (it changes status and metadata, never spec; writes to the
object itself never change status). Lists come in pages with ``limit`` and ``continue``, every page
as of the first one; label and field selectors (only the field labels the apiserver indexes for the
resource). Creates, updates and patches are checked like the apiserver checks names, generateName,
labels, annotations and node taints (422 ``Invalid`` with causes). Discovery (``/api``, ``/apis``,
their group versions) and an OpenAPI v3 skeleton, enough for ``kubectl get``, ``label`` and
client-side ``apply``. ``tests/test_kube_contract.py`` holds the fake and a real kube-apiserver
v1.37 to the same answers.

Not served (each pinned by a test in ``tests/test_kube_contract.py::TestKnownGaps``):

- namespaces: objects go into any namespace, existing or not (the apiserver: 404);
- defaulting, admission and field managers: objects are stored as sent (the apiserver fills in
  pod defaults, taints new nodes ``node.kubernetes.io/not-ready``, records ``managedFields``);
- validation specific to a kind beyond node taints (an Event's ``involvedObject.namespace``,
  a pod's containers, ...);
- server-side apply (415);
- Table output: ``kubectl get`` prints NAME and AGE only;
- bookmarks: at ``timeoutSeconds`` a bookmark-enabled watch always ends with a BOOKMARK, even when
  nothing moved (the apiserver bookmarks about 2 s before the timeout, and only a version past the
  watcher's);
- retention: history is forgotten only when a test says so (`compact`, ``history_limit``), and then
  at once: older watches and continue tokens get 410. The apiserver's watch cache keeps minutes of
  events whatever etcd compacts, so against it a test rarely sees 410;
- in-process writes (`create`, `update`, `patch`) may set status and update leases without a
  resourceVersion; over HTTP the apiserver's rules apply.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones.testing import _kube_faults as faults
from cloudzones.testing import _kube_selectors as selectors
from cloudzones.testing import _kube_server as server
from cloudzones.testing import _kube_status as kstatus
from cloudzones.testing import _kube_store as store
from cloudzones.testing import _kube_watch as watch
from cloudzones.testing._json_tree import copy_tree

_Records = list[faults.RequestRecord]
_Faults = list[faults.Fault]
_Objects = list[dict[str, Any]]
RequestRecord = faults.RequestRecord
ApiStatusError = kstatus.ApiStatusError

_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


class FakeKubeApi:
    """A small Kubernetes API server in memory; start it (or use ``with``) and talk to `url`.

    ``history_limit`` bounds the watch history (older starts get 410 Gone); ``bookmark_interval``
    makes bookmark-enabled watches send a BOOKMARK that often (default: only on request and at
    timeout); ``clock`` stamps ``creationTimestamp``.
    """

    def __init__(self, *, history_limit: int = 10_000, bookmark_interval: float | None = None,
                 clock: Callable[[], datetime.datetime] | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.store = store.KubeStore(history_limit=history_limit, **({"clock": clock} if clock else {}))
        self._book = faults.FaultBook()
        self._hub = watch.WatchHub(self.store, bookmark_interval=bookmark_interval)
        self._address = (host, port)
        self._server: server.Server | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeKubeApi:
        """Bind the port and serve in a daemon thread; returns self."""
        if self._server is None:
            self._server = server.Server(self._address, self.store, self._book, self._hub)
            threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                             name="fake-kube-api", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and cut every connection (open watches see the connection drop)."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> FakeKubeApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, for ``Configuration.host``."""
        if self._server is None:
            raise RuntimeError("the fake API server is not started; call start() or use it in a with block")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- objects, in-process (no HTTP, no faults, not logged; watches see the changes) ------
    def create(self, resource: str, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Store a new object (``status`` included); returns a copy as stored."""
        return copy_tree(self.store.create(resource, obj, namespace))

    def get(self, resource: str, name: str, *, namespace: str = "") -> dict[str, Any]:
        """A copy of an object; `ApiStatusError` (404) when absent."""
        return copy_tree(self.store.get(resource, name, namespace))

    def find(self, resource: str, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        """A copy of an object, or None when absent."""
        try:
            return self.get(resource, name, namespace=namespace)
        except ApiStatusError:
            return None

    def list(self, resource: str, *, namespace: str | None = None,
             label_selector: str | None = None) -> _Objects:
        """Copies of the objects (of ``namespace``, or all), sorted by namespace and name."""
        items, _ = self.store.list(resource, namespace, selectors.label_matcher(label_selector))
        return copy_tree(items)

    def update(self, resource: str, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Replace an object, every field including ``status`` (409 on a stale resourceVersion)."""
        return copy_tree(self.store.update(resource, obj, namespace, subresource=store.ALL))

    def patch(self, resource: str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: str = "merge") -> dict[str, Any]:
        """Patch an object (``merge``, ``strategic`` or ``json``), ``status`` included."""
        return copy_tree(self.store.patch(resource, name, patch, _PATCH_TYPES[patch_type], namespace,
                                              subresource=store.ALL))

    def delete(self, resource: str, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Delete an object (or mark it while it has finalizers); returns its last state."""
        return copy_tree(self.store.delete(resource, name, namespace))

    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest change."""
        return self.store.resource_version

    # -- faults ------------------------------------------------------------------------------
    def fail_next(self, verb: str = "*", resource: str = "*", *, status: int = 500, count: int = 1,
                  retry_after: float | None = None, message: str | None = None,
                  disconnect: bool = False) -> None:
        """Answer the next ``count`` requests matching ``verb`` and ``resource`` with ``status``.

        ``retry_after`` adds a ``Retry-After`` header; ``disconnect`` closes the connection without
        an answer instead. A watch failing with 410 gets it as an ERROR event in a 200 stream.
        """
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count!r}")
        self._book.add_fault(faults.Fault(verb, resource, status, count, retry_after, message, disconnect))

    def pending_faults(self) -> _Faults:
        """The injected faults that have not fired yet."""
        return self._book.pending()

    def set_latency(self, seconds: float, *, verb: str = "*", resource: str = "*") -> None:
        """Delay matching requests by ``seconds`` before answering (0 removes the rule)."""
        self._book.set_latency(seconds, verb, resource)

    def clear_faults(self) -> None:
        """Forget pending faults and latencies."""
        self._book.clear()

    def drop_watches(self, resource: str | None = None, *, graceful: bool = False) -> int:
        """Cut open watch streams (``graceful``: end them cleanly instead); returns how many."""
        return self._hub.act(watch.CLOSE if graceful else watch.DROP, resource)

    def expire_watches(self, resource: str | None = None) -> int:
        """End open watch streams with an ERROR event carrying 410 Gone; returns how many."""
        return self._hub.act(watch.EXPIRE, resource)

    def compact(self) -> int:
        """Forget the event history: watches from any older resourceVersion get 410. Returns the floor."""
        return self.store.compact()

    def bookmark(self, resource: str | None = None) -> int:
        """Make open bookmark-enabled watches send a BOOKMARK now; returns how many."""
        return self._hub.bookmark(resource)

    def watch_count(self, resource: str | None = None) -> int:
        """How many watch streams are open."""
        return self._hub.count(resource)

    def wait_for_watches(self, count: int = 1, *, resource: str | None = None, timeout: float = 5.0) -> bool:
        """Block until ``count`` watches are open; returns whether that happened within ``timeout``."""
        return self._hub.wait_for(count, resource, timeout)

    # -- request log -------------------------------------------------------------------------
    @property
    def requests(self) -> _Records:
        """Every request answered so far, oldest first."""
        return self._book.requests()

    def count(self, verb: str | None = None, resource: str | None = None, *, status: int | None = None) -> int:
        """How many logged requests match (``None`` matches anything)."""
        return sum(1 for r in self._book.requests()
                   if verb in (None, r.verb) and resource in (None, r.resource) and status in (None, r.status))

    def reset_requests(self) -> None:
        """Empty the request log."""
        self._book.reset()

    def wait_for_requests(self, count: int, verb: str | None = None, resource: str | None = None, *,
                          timeout: float = 5.0) -> bool:
        """Block until ``count`` matching requests are logged; returns whether that happened in time."""
        return self._book.wait(
            lambda log: sum(1 for r in log if verb in (None, r.verb) and resource in (None, r.resource)) >= count,
            timeout)

