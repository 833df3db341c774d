"""HTTP to instance-metadata services (Azure IMDS, AWS IMDSv2, GCP): never through a proxy, always bounded.

This module owns ``requests`` for metadata. A metadata endpoint is link-local: a proxy would either
leak the request off the machine or answer for the wrong host, and Azure's docs require clients to
bypass proxies. The session therefore ignores ``HTTP(S)_PROXY`` (``trust_env = False``).

Budgets: when nothing accepts the connection (off-cloud), give up within ``connect_budget``; when a
peer accepts but never answers, give up within ``total_budget``.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Mapping

import requests

from cloudzones import errors, retry

log = logging.getLogger(__name__)

_MIN_ATTEMPT = 0.05
"""An attempt with less time than this left is not worth starting."""


@dataclasses.dataclass(frozen=True)
class MetadataSettings:
    """Timeouts and retry budget for one metadata lookup."""

    connect_timeout: float = 0.5
    """Seconds to wait for a TCP connection in one attempt."""
    read_timeout: float = 2.0
    """Seconds to wait for the response in one attempt."""
    connect_budget: float = 1.5
    """Total seconds spent on attempts that could not connect, before giving up (off-cloud detection)."""
    total_budget: float = 5.0
    """Total seconds for the whole lookup, retries and waits included."""
    retry: retry.RetryPolicy = retry.RetryPolicy(base=0.1, cap=1.0, attempts=4)
    """Attempts at most and the delays between them (a ``Retry-After`` from the service is their floor)."""
    retry_statuses: frozenset[int] = frozenset({410, 429, 500, 502, 503, 504})
    """Statuses worth retrying; 410 and 500 are what Azure IMDS returns while it warms up."""


@dataclasses.dataclass(frozen=True)
class Response:
    """What a metadata call returned."""

    status: int
    text: str
    headers: Mapping[str, str]


class MetadataClient:
    """Issues bounded, proxy-free requests to one metadata service."""

    def __init__(self, *, service: str, settings: MetadataSettings | None = None,
                 session: requests.Session | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, wall_clock: Callable[[], float] = time.time,
                 rand: Callable[[], float] = random.random) -> None:
        self.service = service
        self.settings = settings or MetadataSettings()
        self._session = session or requests.Session()
        self._session.trust_env = False  # ignore HTTP(S)_PROXY, NO_PROXY and .netrc
        self._session.proxies.clear()
        self._clock, self._sleep, self._wall_clock, self._rand = clock, sleep, wall_clock, rand
        self.calls = 0
        """Requests sent (attempts, not lookups), for tests and benchmarks."""

    def __repr__(self) -> str:
        return f"MetadataClient(service={self.service!r})"

    def request(self, method: str, url: str, *, headers: Mapping[str, str],
                accept: Callable[[int], bool] = lambda status: status == 200) -> Response:
        """Send until ``accept(status)`` holds or a non-retryable status arrives; `MetadataError` when out of budget.

        Returns the response whose status was accepted, or one with a status that retrying cannot
        fix (400, 401, 403, 404, ...), for the caller to interpret.
        """
        settings = self.settings
        start = self._clock()
        connected = False  # until a peer answers, the (shorter) connect budget bounds everything
        last_problem = "no attempt made"
        for attempt in range(1, settings.retry.attempts + 1):
            budget = settings.total_budget if connected else settings.connect_budget
            remaining = budget - (self._clock() - start)
            if remaining < _MIN_ATTEMPT:
                break
            connect_timeout = min(settings.connect_timeout, remaining)
            read_timeout = min(settings.read_timeout, settings.total_budget - (self._clock() - start))
            self.calls += 1
            try:
                raw = self._session.request(method, url, headers=dict(headers), timeout=(connect_timeout, read_timeout),
                                            allow_redirects=False)
            except requests.exceptions.ConnectionError as exc:
                # ConnectTimeout is a ConnectionError too; a read timeout is not.
                last_problem = f"cannot connect ({type(exc).__name__})"
                wait = settings.retry.delay(attempt, rand=self._rand)
            except requests.exceptions.Timeout as exc:
                connected = True
                last_problem = f"no answer within {read_timeout:.1f}s ({type(exc).__name__})"
                wait = settings.retry.delay(attempt, rand=self._rand)
            except requests.exceptions.RequestException as exc:
                raise errors.MetadataError(f"{self.service} request to {url} failed: {exc}") from exc
            else:
                connected = True
                response = Response(raw.status_code, raw.text, raw.headers)
                if accept(raw.status_code) or raw.status_code not in settings.retry_statuses:
                    return response
                last_problem = f"HTTP {raw.status_code}"
                after = retry.parse_retry_after(raw.headers.get("Retry-After"), now=self._wall_clock())
                wait = settings.retry.delay(attempt, rand=self._rand, retry_after=after)
                if self._clock() - start + wait > settings.total_budget:
                    raise errors.MetadataError(
                        f"{self.service} answered HTTP {raw.status_code} and asks to wait {wait:.1f}s,"
                        f" beyond the {settings.total_budget:.1f}s budget")
            log.debug("%s attempt %d: %s", self.service, attempt, last_problem)
            budget = settings.total_budget if connected else settings.connect_budget
            left_after_wait = budget - (self._clock() - start) - wait
            if attempt == settings.retry.attempts or left_after_wait < _MIN_ATTEMPT:
                break
            if wait > 0:
                self._sleep(wait)
        elapsed = self._clock() - start
        raise errors.MetadataError(
            f"{self.service} at {url} did not answer usefully after {elapsed:.1f}s: {last_problem}")

