"""Shared test helpers: fixture loading, a fake clock, a fake Azure credential."""

from __future__ import annotations

import json
import logging
import os
import pathlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from azure.core.credentials import AccessToken, AccessTokenInfo

from cloudzones.testing.kubeapi import FakeKubeApi

if TYPE_CHECKING:
    from cloudzones.testing.controlplane import ControlPlane

# The contract suite's `backend` fixture (fake and real API server), shared by its two modules.
pytest_plugins = ["tests.kube_contract"]

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"


def fixture_text(relative: str) -> str:
    """The text of ``fixtures/<relative>``."""
    return (FIXTURES / relative).read_text(encoding="utf-8")


def fixture_body(relative: str, status: str = "200") -> Any:
    """A fixture's JSON body; spec examples are unwrapped to ``responses[status].body``."""
    data = json.loads(fixture_text(relative))
    if isinstance(data, dict) and "responses" in data and "parameters" in data:
        return data["responses"][status]["body"]
    return data


class FakeClock:
    """A monotonic clock that only moves when told to; ``sleep`` advances it and records the wait."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeCredential:
    """An azure-core TokenCredential that never talks to the network."""

    def __init__(self) -> None:
        self.requests = 0

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.requests += 1
        return AccessToken("fake-token", int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        self.requests += 1
        return AccessTokenInfo("fake-token", int(time.time()) + 3600)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Undo ``cloudzones.services.logs.configure`` after CLI tests: its handler holds pytest's soon-closed stderr."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    quiet = {name: logging.getLogger(name).level
             for name in ("azure", "urllib3", "kubernetes", "cloudzones", "providers", "storageclass")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, previous in quiet.items():
        logging.getLogger(name).setLevel(previous)


@pytest.fixture
def api() -> Iterator[FakeKubeApi]:
    """A fresh in-memory Kubernetes API server on loopback."""
    with FakeKubeApi() as server:
        yield server


@pytest.fixture
def server_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the socket writes made from threads other than the test's own (the fakes' servers),
    plain or TLS; a TLS ``sendall`` counts once, not once per ``send`` it makes."""
    sizes: list[int] = []
    inside = threading.local()
    main = threading.current_thread()

    def counting(original: Any) -> Any:
        def write(sock: socket.socket, data: Any, *args: Any) -> Any:
            if threading.current_thread() is main or getattr(inside, "busy", False):
                return original(sock, data, *args)
            inside.busy = True
            try:
                sizes.append(len(data))
                return original(sock, data, *args)
            finally:
                inside.busy = False
        return write

    for cls in (socket.socket, ssl.SSLSocket):
        for name in ("send", "sendall"):
            monkeypatch.setattr(cls, name, counting(getattr(cls, name)))
    return sizes


@pytest.fixture
def clock() -> FakeClock:
    """A fresh fake clock."""
    return FakeClock()


def _control_plane_or_skip() -> pathlib.Path:
    """The binaries' folder; without one the test is skipped, or fails when CI requires the control plane."""
    from cloudzones.testing import controlplane

    found = controlplane.find_binaries()
    if found is None:
        message = ("no control-plane binaries: run 'scripts/control-plane build' or set CLOUDZONES_CONTROL_PLANE")
        if os.environ.get("CLOUDZONES_REQUIRE_CONTROL_PLANE") == "1":
            pytest.fail(f"CLOUDZONES_REQUIRE_CONTROL_PLANE=1 but {message}", pytrace=False)
        pytest.skip(message)
    return found


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """One real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) for the whole run.

    Tests share it, so each works in namespaces and on objects of its own and removes cluster-scoped
    objects (nodes, PVs, webhook configurations) it created.
    """
    _control_plane_or_skip()
    from cloudzones.testing.controlplane import ControlPlane as _ControlPlane

    with _ControlPlane(scheduler=True, controller_manager=True) as plane:
        yield plane


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use the control_plane fixture carry the ``controlplane`` marker (``-m 'not controlplane'``)."""
    for item in items:
        if "control_plane" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.controlplane)
