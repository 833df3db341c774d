"""The Kubernetes API adapter: the only module that imports ``kubernetes``; plain manifest dicts in and out.

Every call goes through the official client's typed methods with ``_preload_content=False`` and
the body is JSON-decoded here, so no client model (pydantic since v37) ever reaches the rest of
cloudzones. Errors become `cloudzones.errors.KubeApiError` and its subclasses, chained to the
client's exception. 429s, 5xx answers and connection errors are retried a bounded number of
times, honouring ``Retry-After``, through an injectable ``sleep``; creates are retried only on
429, since a repeat after a lost answer could collide with a first attempt that succeeded.

Bodies of ``create`` and ``update`` pass through the client's model validation (its typed
methods validate them): an unknown field is refused before any request, timestamps come out as
``+00:00`` rather than ``Z``. Patches are sent as given.
"""

from __future__ import annotations

import builtins
import logging
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import kubernetes.client
import kubernetes.config
import urllib3

from cloudzones import documents, errors, shapes
from cloudzones import retry as retry_
from cloudzones.kube import kubeconfig
from cloudzones.kube.resources import RESOURCES, Resource
from cloudzones.kube.watch import WatchEvent, WatchStream, error_from_status

__all__ = ["KubeClient", "WatchEvent", "WatchStream"]

logger = logging.getLogger(__name__)

_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}




DEFAULT_RETRY = retry_.RetryPolicy(base=0.5, cap=30.0, attempts=5, max_retry_after=60.0)
"""The client's retries: five tries, the last within ~15 s; a ``Retry-After`` over a minute is cut to one."""


def translate(exc: BaseException, what: str) -> errors.KubeApiError:
    """Our error for a client exception raised while doing ``what`` (``'patch of nodes "n1"'``)."""
    if isinstance(exc, kubernetes.client.ApiException) and exc.status:
        status_body: dict[str, Any] = {}
        try:
            parsed = documents.peer_json(exc.body or "")
            status_body = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            pass
        headers = exc.headers or {}
        retry_after = retry_.parse_retry_after(headers.get("Retry-After"), now=time.time())
        if retry_after is None:
            retry_after = (status_body.get("details") or {}).get("retryAfterSeconds")
        status_body.setdefault("code", exc.status)
        status_body.setdefault("message", exc.reason or "")
        return error_from_status(status_body, what, retry_after=retry_after)
    return errors.KubeApiError(f"{what} failed: the API server could not be reached ({exc})")


def _decode(data: bytes, what: str) -> dict[str, Any]:
    try:
        decoded = documents.peer_json(data)
    except documents.NestedTooDeeply:
        raise errors.KubeApiError(f"{what}: the API server answered with JSON nested too deeply to read") from None
    except ValueError as exc:
        raise errors.KubeApiError(f"{what}: the API server answered with something that is not JSON: "
                                  f"{data[:200]!r}") from exc
    if not isinstance(decoded, dict):
        raise errors.KubeApiError(f"{what}: the API server answered with {decoded!r}, not an object")
    return decoded


def _list_page(page: dict[str, Any], what: str) -> dict[str, Any]:
    """``page`` when it has the shape of a List (``items`` a list of mappings, ``metadata`` a mapping, either
    absent): an informer keys every item by its metadata, and a number there would fail in its thread."""
    for field, kind in (("items", list), ("metadata", dict)):
        if page.get(field) is not None and not isinstance(page[field], kind):
            raise errors.KubeApiError(f"{what}: the API server answered with a list whose {field} is "
                                      f"{shapes.describe(page[field])}")
    for index, item in enumerate(page.get("items") or ()):
        if type(item) is not dict:
            raise errors.KubeApiError(f"{what}: the API server answered with items[{index}]: expected a mapping, "
                                      f"got {shapes.describe(item)}")
    return page


def _resource(resource: Resource | str) -> Resource:
    if isinstance(resource, Resource):
        return resource
    try:
        return RESOURCES[resource]
    except KeyError:
        raise errors.ConfigError(f"unknown resource {resource!r}; known: {sorted(RESOURCES)}") from None


def _described(rtype: Resource, name: str, namespace: str | None) -> str:
    return f'{rtype.plural} "{namespace}/{name}"' if namespace else f'{rtype.plural} "{name}"'


class KubeClient:
    """Get, list, watch, create, update, patch and delete Kubernetes objects as plain dicts.

    Build one with `from_kubeconfig`, `in_cluster`, `from_environment` or `for_host` (tests).
    ``sleep`` and ``rand`` are injectable so that retries cost tests no time.
    """

    def __init__(self, api_client: Any, *, retry: retry_.RetryPolicy | None = None,
                 sleep: Callable[[float], object] = time.sleep, rand: Callable[[], float] = random.random,
                 request_timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.retry = retry or DEFAULT_RETRY
        self._sleep = sleep
        self._rand = rand
        self._request_timeout = request_timeout
        self._apis: dict[str, Any] = {}

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def for_host(cls, host: str, *, token: str | None = None, ca_cert: str | None = None,
                 verify_ssl: bool = True, proxy: str | None = None, **options: Any) -> KubeClient:
        """A client for an explicit API server URL (no proxy unless given: tests use loopback)."""
        config = kubernetes.client.Configuration(host=host)
        config.proxy = proxy
        config.verify_ssl = verify_ssl
        config.ssl_ca_cert = ca_cert
        if token:
            config.api_key["BearerToken"] = f"Bearer {token}"
        return cls._from_configuration(config, **options)

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, *, context: str | None = None, **options: Any) -> KubeClient:
        """A client from a kubeconfig file (default ``$KUBECONFIG`` or ``~/.kube/config``)."""
        config = kubernetes.client.Configuration()
        # The client reads $KUBECONFIG once, at import; we read it when asked.
        path = path or os.environ.get("KUBECONFIG") or None
        kubeconfig.check_files(path)
        try:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=context, client_configuration=config, persist_config=False)
        except (kubernetes.config.ConfigException, OSError, TypeError, AttributeError, ValueError, KeyError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise errors.ConfigError(f"kubeconfig {path or '(default)'}: cannot be used: {reason}") from exc
        kubeconfig.check_configuration(config, path or "(default)")
        return cls._from_configuration(config, **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeClient:
        """A client from the pod's service account (token re-read as the kubelet rotates it)."""
        config = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
        except kubernetes.config.ConfigException as exc:
            raise errors.ConfigError(f"not running in a cluster, or no service account: {exc}") from exc
        return cls._from_configuration(config, **options)

    @classmethod
    def from_environment(cls, *, kubeconfig: str | None = None, context: str | None = None,
                         **options: Any) -> KubeClient:
        """In-cluster when ``KUBERNETES_SERVICE_HOST`` is set and no kubeconfig is named, else the kubeconfig."""
        if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster(**options)
        return cls.from_kubeconfig(kubeconfig, context=context, **options)

    @classmethod
    def _from_configuration(cls, config: Any, **options: Any) -> KubeClient:
        config.retries = False  # urllib3 must not retry behind our back: our RetryPolicy decides
        return cls(kubernetes.client.ApiClient(config), **options)

    def close(self) -> None:
        """Close the connection pool."""
        self.api_client.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def host(self) -> str:
        """The API server URL."""
        return str(self.api_client.configuration.host)

    # -- verbs ---------------------------------------------------------------------------------
    def get(self, resource: Resource | str, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The object; `errors.KubeNotFound` when it does not exist."""
        rtype = _resource(resource)
        return self._json(f"get of {_described(rtype, name, namespace)}", True,
                          self._method(rtype, "read"), name, *self._ns(rtype, namespace))

    def list(self, resource: Resource | str, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, page_size: int | None = None) -> dict[str, Any]:
        """The List object (``items`` and ``metadata.resourceVersion``); all namespaces when ``namespace`` is None.

        With ``page_size`` the list is fetched in pages (``limit``/``continue``) and returned whole.
        """
        items: list[dict[str, Any]] = []
        for result in self.list_pages(resource, namespace=namespace, label_selector=label_selector,
                                      field_selector=field_selector, page_size=page_size):
            items.extend(result.get("items") or [])
        result["items"] = items
        return result

    def list_pages(self, resource: Resource | str, *, namespace: str | None = None,
                   label_selector: str | None = None, field_selector: str | None = None,
                   page_size: int | None = None) -> Iterator[dict[str, Any]]:
        """The list as a series of List objects of at most ``page_size`` items (one when ``page_size`` is None).

        A caller that reduces each page before asking for the next never holds more than a page of
        whole objects (an informer over 5,000 nodes: one page's ~10 MB rather than ~100 MB).
        """
        rtype = _resource(resource)
        what = f"list of {rtype.plural}" + (f" in {namespace!r}" if namespace else "")
        method, args = self._list_method(rtype, namespace)
        kwargs: dict[str, Any] = {"label_selector": label_selector, "field_selector": field_selector,
                                  "limit": page_size}
        token = None
        while True:
            page = _list_page(self._json(what, True, method, *args, _continue=token, **kwargs), what)
            token = (page.get("metadata") or {}).get("continue") if page_size else None
            yield page
            del page  # not kept alive while the next page is fetched
            if not token:
                return

    def get_custom(self, group: str, version: str, plural: str, name: str, *,
                   namespace: str | None = None) -> dict[str, Any]:
        """One custom object; `errors.KubeNotFound` when it, or its CRD, does not exist."""
        api = self._api("CustomObjectsApi")
        what = f"get of {plural}.{group} {name!r}" + (f" in {namespace!r}" if namespace else "")
        if namespace:
            return self._json(what, True, api.get_namespaced_custom_object, group, version, namespace, plural, name)
        return self._json(what, True, api.get_cluster_custom_object, group, version, plural, name)

    def list_custom(self, group: str, version: str, plural: str, *, namespace: str | None = None,
                    page_size: int | None = 500) -> builtins.list[dict[str, Any]]:
        """Every object of a custom resource, paged; `errors.KubeNotFound` when its CRD is not installed."""
        api = self._api("CustomObjectsApi")
        what = f"list of {plural}.{group}" + (f" in {namespace!r}" if namespace else "")
        method, args = ((api.list_namespaced_custom_object, (group, version, namespace, plural)) if namespace
                        else (api.list_cluster_custom_object, (group, version, plural)))
        items: builtins.list[dict[str, Any]] = []
        token = None
        while True:
            page = _list_page(self._json(what, True, method, *args, _continue=token, limit=page_size), what)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") if page_size else None
            if not token:
                return items

    def create(self, resource: Resource | str, body: Mapping[str, Any], *,
               namespace: str | None = None) -> dict[str, Any]:
        """Create the object; `errors.KubeAlreadyExists` when the name is taken."""
        rtype = _resource(resource)
        namespace = namespace or (body.get("metadata") or {}).get("namespace")
        name = (body.get("metadata") or {}).get("name") or (body.get("metadata") or {}).get("generateName", "")
        return self._json(f"create of {_described(rtype, name, namespace)}", False,
                          self._method(rtype, "create"), *self._ns(rtype, namespace), dict(body))

    def update(self, resource: Resource | str, body: Mapping[str, Any], *, namespace: str | None = None,
               subresource: str | None = None) -> dict[str, Any]:
        """Replace the object named in ``body``; `errors.KubeConflict` when its resourceVersion is stale."""
        rtype = _resource(resource)
        metadata = body.get("metadata") or {}
        namespace = namespace or metadata.get("namespace")
        name = metadata.get("name", "")
        return self._json(f"update of {_described(rtype, name, namespace)}", True,
                          self._method(rtype, "replace", subresource), name, *self._ns(rtype, namespace), dict(body))

    def patch(self, resource: Resource | str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        """Patch the object: ``merge`` (RFC 7386, the default), ``strategic`` or ``json`` (RFC 6902)."""
        rtype = _resource(resource)
        if patch_type not in _PATCH_TYPES:
            raise errors.ConfigError(f"unknown patch type {patch_type!r}; use one of {sorted(_PATCH_TYPES)}")
        return self._json(f"patch of {_described(rtype, name, namespace)}", True,
                          self._method(rtype, "patch", subresource), name, *self._ns(rtype, namespace), patch,
                          _content_type=_PATCH_TYPES[patch_type])

    def delete(self, resource: Resource | str, name: str, *, namespace: str | None = None,
               resource_version: str | None = None) -> dict[str, Any]:
        """Delete the object (only at ``resource_version`` when given); returns what the server answered."""
        rtype = _resource(resource)
        body = {"preconditions": {"resourceVersion": resource_version}} if resource_version else None
        return self._json(f"delete of {_described(rtype, name, namespace)}", True,
                          self._method(rtype, "delete"), name, *self._ns(rtype, namespace), body=body)

    def watch(self, resource: Resource | str, *, namespace: str | None = None, resource_version: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: int | None = None, bookmarks: bool = True) -> WatchStream:
        """Open a watch; iterate the returned `WatchStream` for `WatchEvent` s (``stop()`` ends it from any thread).

        An ERROR event raises from the iteration: `errors.KubeGone` for 410 (list again, then watch).
        Pass ``timeout_seconds``: it also bounds how long a silently dead connection can hang.
        """
        rtype = _resource(resource)
        what = f"watch of {rtype.plural}" + (f" in {namespace!r}" if namespace else "")
        method, args = self._list_method(rtype, namespace)
        response = self._call(what, True, lambda: method(
            *args, watch=True, resource_version=resource_version, label_selector=label_selector,
            field_selector=field_selector, timeout_seconds=timeout_seconds, allow_watch_bookmarks=bookmarks,
            _preload_content=False,
            _request_timeout=(self._request_timeout, timeout_seconds + self._request_timeout)
            if timeout_seconds else None))
        return WatchStream(response, what=what)

    # -- plumbing ------------------------------------------------------------------------------
    def _api(self, name: str) -> Any:
        if name not in self._apis:
            self._apis[name] = getattr(kubernetes.client, name)(self.api_client)
        return self._apis[name]

    def _method(self, rtype: Resource, verb: str, subresource: str | None = None) -> Callable[..., Any]:
        if subresource not in (None, "status"):
            raise errors.ConfigError(f"unknown subresource {subresource!r}; only 'status' is supported")
        suffix = f"_{subresource}" if subresource else ""
        return getattr(self._api(rtype.api), f"{verb}_{rtype.method}{suffix}")  # type: ignore[no-any-return]

    def _list_method(self, rtype: Resource, namespace: str | None) -> tuple[Callable[..., Any], tuple[str, ...]]:
        if rtype.namespaced and not namespace:
            return getattr(self._api(rtype.api), f"list_{rtype._all_namespaces}"), ()
        return self._method(rtype, "list"), self._ns(rtype, namespace)

    @staticmethod
    def _ns(rtype: Resource, namespace: str | None) -> tuple[str, ...]:
        if not rtype.namespaced:
            return ()
        if not namespace:
            raise errors.ConfigError(f"{rtype.plural} are namespaced: say which namespace")
        return (namespace,)

    def _json(self, what: str, retry_errors: bool, method: Callable[..., Any], *args: Any,
              **kwargs: Any) -> dict[str, Any]:
        kwargs = {k: v for k, v in kwargs.items() if v is not None}

        def call() -> bytes:
            response = method(*args, _preload_content=False, _request_timeout=self._request_timeout, **kwargs)
            try:
                return bytes(response.data)
            finally:
                response.release_conn()

        return _decode(self._call(what, retry_errors, call), what)

    def _call(self, what: str, retry_errors: bool, call: Callable[[], Any]) -> Any:
        """Run ``call``, repeating on 429 (and, with ``retry_errors``, on 5xx and connection errors)."""
        for attempt in range(1, max(1, self.retry.attempts) + 1):
            try:
                return call()
            except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                error, cause = translate(exc, what), exc
            except ValueError as exc:  # the client's model validation refused the body
                raise errors.KubeApiError(f"{what}: the client refused the body before sending it: {exc}") from exc
            worth_it = error.status == 429 or (retry_errors and (error.status is None or error.status >= 500))
            if not worth_it or attempt >= self.retry.attempts:
                raise error from cause
            delay = self.retry.delay(attempt, rand=self._rand, retry_after=error.retry_after)
            logger.warning("%s; retrying in %.1f s (attempt %d of %d)", error, delay, attempt + 1,
                           self.retry.attempts)
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

