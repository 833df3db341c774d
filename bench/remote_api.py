"""`RemoteKubeApi`: a `FakeKubeApi` in a child process, for benchmarks (not a benchmark itself).

In-process, the fake API server shares the GIL and the heap with the code under test, which an
API server never does: its JSON encoding and its threads would be billed to the controller, its
objects to the controller's memory. Here it runs in a spawned process; the benchmark reaches its
in-process state with `RemoteKubeApi.call`, which runs a picklable function (a module-level one)
as ``fn(api, *args)`` in the child and returns its result.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
from collections.abc import Callable
from typing import Any

from cloudzones.testing.kubeapi import FakeKubeApi

Seed = Callable[[FakeKubeApi], object]


def _serve(conn: multiprocessing.connection.Connection, seed: Seed | None) -> None:
    with FakeKubeApi() as api:
        conn.send((api.url, None if seed is None else seed(api)))
        while True:
            message = conn.recv()
            if message is None:
                break
            fn, args = message
            try:
                conn.send((True, fn(api, *args)))
            except Exception as exc:  # reported to the parent, which raises it
                conn.send((False, f"{type(exc).__name__}: {exc}"))
    conn.close()


class RemoteKubeApi:
    """Start with ``with RemoteKubeApi(seed) as api:``; ``api.url`` is where the fake listens."""

    def __init__(self, seed: Seed | None = None, *, timeout: float = 300.0) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, seed), name="fake-kube-api", daemon=True)
        self._timeout = timeout
        self.url = ""
        self.seeded: Any = None
        """What ``seed`` returned (it must pickle)."""

    def __enter__(self) -> RemoteKubeApi:
        self._process.start()
        if not self._conn.poll(self._timeout):
            raise RuntimeError("the fake API server process did not start")
        self.url, self.seeded = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The child's process id."""
        return self._process.pid

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(api, *args)`` run in the child; its (picklable) result."""
        self._conn.send((fn, args))
        if not self._conn.poll(self._timeout):
            raise RuntimeError(f"the fake API server process did not answer {fn.__name__} in time")
        ok, result = self._conn.recv()
        if not ok:
            raise RuntimeError(f"{fn.__name__} failed in the fake API server process: {result}")
        return result

    def close(self) -> None:
        """Stop the child."""
        if self._process.is_alive():
            self._conn.send(None)
            self._process.join(10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)
