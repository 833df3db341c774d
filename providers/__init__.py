"""Cloud adapters behind one small protocol: ``providers.get("azure" | "aws" | "gcp", **options)``.

``detect()`` asks every metadata service at once and reports the one that answers, for the CLI's
``--provider auto``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from cloudzones import errors
from cloudzones.topology import Topology

NAMES = ("azure", "aws", "gcp")


@runtime_checkable
class Provider(Protocol):
    """What every cloud adapter offers."""

    name: str

    def local_topology(self) -> Topology:
        """This machine's topology, from its instance metadata."""

    def topology_by_provider_id(self, provider_id: str, *,
                                on_busy: Callable[[], object] | None = None) -> Topology | None:
        """A node's topology by ``spec.providerID``; None when this provider does not manage it.

        With ``on_busy``, a lookup that would wait behind another thread's fetch raises
        `errors.FetchInProgress` instead, and ``on_busy()`` is called when that fetch is over.
        """

    def topology_by_node_name(self, node_name: str) -> Topology:
        """A node's topology by name; `NodeNotFound` when the cloud has no such instance."""


def get(name: str, **options: Any) -> Provider:
    """The provider called ``name``, built with ``options`` (see each provider's constructor)."""
    if name == "azure":
        from providers.azure import provider as azure

        return azure.provider_from_options(**options)
    if name == "aws":
        from providers.aws import AwsProvider

        return AwsProvider(**options)
    if name == "gcp":
        from providers.gcp import GcpProvider

        return GcpProvider(**options)
    raise errors.ConfigError(f"unknown provider {name!r}; expected one of {list(NAMES)}")


def detect(candidates: Sequence[Provider], *, timeout: float = 6.0,
           clock: Callable[[], float] = time.monotonic) -> tuple[Provider, Topology]:
    """Ask every provider's metadata service in parallel; the first (in ``candidates`` order) that answers wins.

    Threads are daemons, so a metadata host stuck in DNS cannot hold the process past ``timeout``.
    """
    results: queue.Queue[tuple[int, Topology | BaseException]] = queue.Queue()

    def ask(index: int, provider: Provider) -> None:
        try:
            results.put((index, provider.local_topology()))
        except Exception as exc:
            results.put((index, exc))

    for index, provider in enumerate(candidates):
        threading.Thread(target=ask, args=(index, provider), daemon=True, name=f"detect-{provider.name}").start()
    outcomes: dict[int, Topology | BaseException] = {}
    deadline = clock() + timeout
    while len(outcomes) < len(candidates):
        # Stop early once the most preferred pending provider can no longer beat an answer we have.
        answered = [i for i, o in outcomes.items() if isinstance(o, Topology)]
        if answered and all(i in outcomes for i in range(min(answered))):
            break
        left = deadline - clock()
        if left <= 0:
            break
        try:
            index, outcome = results.get(timeout=left)
        except queue.Empty:
            break
        outcomes[index] = outcome
    for index in sorted(outcomes):
        outcome = outcomes[index]
        if isinstance(outcome, Topology):
            return candidates[index], outcome
    reasons = "; ".join(
        f"{p.name}: {outcomes.get(i, 'no answer in time')}" for i, p in enumerate(candidates))
    raise errors.MetadataError(f"no cloud metadata service answered ({reasons})")
