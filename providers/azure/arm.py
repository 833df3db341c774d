"""azure-core plumbing shared by the ARM clients: endpoints, retry policy, throttle gate, error mapping.

`reading` and `expect` turn an answer ARM could not have sent (not JSON, nested past the parser, not
the SDK's model, fields of the wrong type) into one `CloudApiError` naming the call.

The Azure SDK's default retry policy sleeps through a 429 (for as long as ``Retry-After`` says) and
retries; we want a bounded budget instead: 5xx and connection errors are retried a few times,
waits are capped, and a 429 closes the `ThrottleGate` so later calls fail fast without a request.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, NoReturn, TypeVar

from azure.core import AzureClouds
from azure.core.exceptions import AzureError, HttpResponseError, ResourceNotFoundError
from azure.core.pipeline import PipelineRequest, PipelineResponse
from azure.core.pipeline.policies import RetryPolicy
from azure.mgmt.core.tools import get_arm_endpoints

from cloudzones import documents, errors, retry, shapes
from providers.azure.throttle import ThrottleGate

_CLOUDS = {
    "AzurePublicCloud": AzureClouds.AZURE_PUBLIC_CLOUD,
    "AzureChinaCloud": AzureClouds.AZURE_CHINA_CLOUD,
    "AzureUSGovernmentCloud": AzureClouds.AZURE_US_GOVERNMENT,
}


def endpoints(cloud: str, resource_manager_url: str | None = None) -> tuple[str, list[str]]:
    """The ARM base URL and token scopes for ``cloud``, or for an explicit endpoint."""
    if resource_manager_url:
        base = resource_manager_url.rstrip("/")
        return base, [f"{base}/.default"]
    found = get_arm_endpoints(_CLOUDS[cloud])
    return str(found["resource_manager"]).rstrip("/"), list(found["credential_scopes"])


@dataclasses.dataclass(frozen=True)
class ArmSettings:
    """How ARM calls are retried and throttled."""

    retry_total: int = 3
    """Retries after the first attempt, for 5xx, 408 and connection errors (never 429)."""
    backoff_factor: float = 0.5
    """azure-core's exponential backoff factor between retries."""
    max_retry_wait: float = 10.0
    """A ``Retry-After`` longer than this is not waited out: the call fails with ``retry_after`` set."""
    default_throttle: float = 5.0
    """How long a 429 without ``Retry-After`` closes the gate."""
    polling_interval: float = 2.0
    """Seconds between polls of a long-running operation (disk creation) when ARM gives no ``Retry-After``."""
    polling_timeout: float = 300.0
    """Longest wait for a long-running operation before giving up."""


class _BoundedRetryPolicy(RetryPolicy):  # type: ignore[type-arg]
    """azure-core's RetryPolicy with a gate check, no retry on 429, capped waits, and an injectable sleep."""

    def __init__(self, *, gate: ThrottleGate, settings: ArmSettings, sleep: Callable[[float], None]) -> None:
        super().__init__(retry_total=settings.retry_total, retry_backoff_factor=settings.backoff_factor,
                         retry_backoff_max=settings.max_retry_wait)
        self._gate, self._settings, self._sleep = gate, settings, sleep

    def send(self, request: PipelineRequest[Any]) -> PipelineResponse[Any, Any]:
        self._gate.check(request.http_request.method)
        response: PipelineResponse[Any, Any] = super().send(request)
        return response

    def is_retry(self, settings: dict[str, Any], response: PipelineResponse[Any, Any]) -> bool:
        if response.http_response.status_code == 429:
            return False
        wait = self.get_retry_after(response)
        if wait is not None and wait > self._settings.max_retry_wait:
            return False
        return bool(super().is_retry(settings, response))

    def sleep(self, settings: dict[str, Any], transport: Any,
              response: PipelineResponse[Any, Any] | None = None) -> None:
        wait = self.get_retry_after(response) if response is not None else None
        if wait is None:
            wait = self.get_backoff_time(settings)
        if wait and wait > 0:
            self._sleep(min(wait, self._settings.max_retry_wait))


def client_options(gate: ThrottleGate, *, settings: ArmSettings, sleep: Callable[[float], None] = time.sleep,
                   wall_clock: Callable[[], float] = time.time, transport: Any = None,
                   connection_verify: Any = None) -> dict[str, Any]:
    """Keyword arguments for an azure-mgmt client: our retry policy, counting and gating hooks, transport."""

    def on_request(request: PipelineRequest[Any]) -> None:
        gate.record(request.http_request.method)

    def on_response(response: PipelineResponse[Any, Any]) -> None:
        http = response.http_response
        if http.status_code == 429:
            gate.close(response.http_request.method, retry_after_of(http.headers, now=wall_clock()))

    options: dict[str, Any] = {
        "retry_policy": _BoundedRetryPolicy(gate=gate, settings=settings, sleep=sleep),
        "raw_request_hook": on_request,
        "raw_response_hook": on_response,
        "polling_interval": settings.polling_interval,
    }
    if transport is not None:
        options["transport"] = transport
    if connection_verify is not None:
        options["connection_verify"] = connection_verify  # a CA bundle path, for loopback fakes
    return options


T = TypeVar("T")


class ArmApi:
    """Base of the per-SDK ARM clients (compute, network): one subscription, our retry policy, gate and counters.

    Subclasses set ``client_class`` to their SDK's management client; this module stays free of them.
    """

    client_class: ClassVar[Callable[..., Any]]

    def __init__(self, credential: Any, subscription_id: str, *, gate: ThrottleGate, base_url: str,
                 credential_scopes: list[str], settings: ArmSettings, sleep: Callable[[float], None] = time.sleep,
                 transport: Any = None, connection_verify: Any = None) -> None:
        options = client_options(gate, settings=settings, sleep=sleep, transport=transport,
                                 connection_verify=connection_verify)
        self.subscription_id = subscription_id
        self.client = self.client_class(credential, subscription_id, base_url=base_url,
                                        credential_scopes=credential_scopes, **options)

    def _call(self, action: str, fn: Callable[[], T]) -> T:
        """``fn()`` (an SDK call and what we make of its answer); its failures as one `CloudApiError`."""
        with reading(action):
            try:
                return fn()
            except AzureError as exc:
                raise_cloud_error(exc, action)

    def _find(self, action: str, fn: Callable[[], T]) -> T | None:
        """`_call`, but None when ARM says the resource does not exist."""
        with reading(action):
            try:
                return fn()
            except AzureError as exc:
                if is_not_found(exc):
                    return None
                raise_cloud_error(exc, action)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(subscription_id={self.subscription_id!r})"


def retry_after_of(headers: Any, *, now: float) -> float | None:
    """Seconds from ARM's ``Retry-After`` (or its millisecond variants) in ``headers``."""
    for name, scale in (("retry-after-ms", 0.001), ("x-ms-retry-after-ms", 0.001)):
        value = retry.parse_retry_after(headers.get(name), now=now)
        if value is not None:
            return value * scale
    return retry.parse_retry_after(headers.get("Retry-After"), now=now)


def raise_cloud_error(exc: AzureError, action: str, *, gate: ThrottleGate | None = None,
                      wall_clock: Callable[[], float] = time.time) -> NoReturn:
    """Re-raise an azure-core error as `CloudApiError` (or `NodeNotFound`-worthy 404s as-is for the caller)."""
    status = getattr(exc, "status_code", None)
    retry_after = None
    response = getattr(exc, "response", None)
    if response is not None:
        retry_after = retry_after_of(response.headers, now=wall_clock())
    code = ""
    if isinstance(exc, HttpResponseError) and exc.error is not None:
        code = f" {exc.error.code}:" if exc.error.code else ""
        detail = exc.error.message or str(exc.message)
    else:
        detail = str(getattr(exc, "message", "") or exc)
    what = f"HTTP {status}" if status else type(exc).__name__
    hint = ""
    if status == 429:
        hint = f" (throttled; retry after {retry_after:.0f}s)" if retry_after is not None else " (throttled)"
    raise errors.CloudApiError(f"ARM {action} failed with {what}:{code} {detail}{hint}",
                               status=status, retry_after=retry_after) from exc


def is_not_found(exc: BaseException) -> bool:
    """Whether an azure-core error means the resource does not exist."""
    return isinstance(exc, ResourceNotFoundError) or getattr(exc, "status_code", None) == 404


@contextlib.contextmanager
def reading(action: str) -> Iterator[None]:
    """Within: an unreadable ARM answer to ``action`` becomes one `CloudApiError` saying what was wrong.

    JSON nested past the parser raises RecursionError in azure-core's decode policy (`NestedTooDeeply` in
    ours, `documents.peer_json`); text that
    is not JSON or not UTF-8, a body the SDK cannot deserialize into its models (its
    DeserializationError) and `expect` raise ValueError; `shapes.check` raises `shapes.ShapeError`; the
    SDK's generated pagers take every page for an object (``deserialized.get("value")``) and raise
    AttributeError on a list or a string. Our own errors pass through unchanged.
    """
    try:
        yield
    except (RecursionError, documents.NestedTooDeeply):
        raise errors.CloudApiError(f"ARM {action}: the answer is JSON nested too deeply to read") from None
    except shapes.ShapeError as exc:
        raise errors.CloudApiError(f"ARM {action}: unexpected answer: {exc}") from None
    except errors.CloudZonesError:
        raise
    except (ValueError, AttributeError, TypeError) as exc:
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "cannot be deserialized"
        raise errors.CloudApiError(f"ARM {action}: unexpected answer ({type(exc).__name__}: {detail})") from None


def expect(value: Any, kind: type[T] | tuple[type[T], ...]) -> T:
    """``value`` if it is the SDK model ``kind`` (a body that is a list or a string comes back as itself)."""
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"expected a {names}, got {shapes.describe(value)}")
    return value
