"""The fake API server's memory: objects, a monotonic resourceVersion, and a bounded event history.

Stored objects are never changed in place: every write stores a new dict, so watch events and
readers can hold references without copying. One condition variable guards everything and wakes
the watch streams.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime
import random
import string
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from cloudzones.testing import _kube_patch as patches
from cloudzones.testing import _kube_status as status
from cloudzones.testing import _kube_validation as validation
from cloudzones.testing._json_tree import SCALARS, copy_tree
from cloudzones.testing._kube_selectors import Matcher

ALL = "*"
"""``subresource`` for in-process writes: change every field, ``status`` included."""

PATCH_TYPES = {
    "application/merge-patch+json": patches.merge_patch,
    "application/strategic-merge-patch+json": patches.strategic_merge_patch,
    "application/json-patch+json": patches.json_patch,
}


_Objects = list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Event:
    """One change, as the watch streams replay it."""

    rv: int
    type: str
    resource: str
    namespace: str
    new: dict[str, Any]
    old: dict[str, Any] | None


_Events = list[Event]


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _prune(value: Any) -> Any:
    # JSON null in a PUT or POST means "unset", and the apiserver's Go types omit empty lists: it
    # stores and returns such fields absent. Every dict and list is rebuilt and anything else not a
    # scalar copied, so the result is also a deep copy: what a caller passed is never stored.
    # Exact types first: this walks every field of every write, and an ABC isinstance per field was a
    # third of the fake's CPU per PATCH.
    kind = type(value)
    if kind in SCALARS:
        return value
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        return {k: v if type(v) in SCALARS else _prune(v) for k, v in value.items() if v is not None and v != []}
    if isinstance(value, list):
        return [v if type(v) in SCALARS else _prune(v) for v in value]
    return copy_tree(value)


def _prune_nulls(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without its nulls and empty lists (and ObjectMeta's empty maps): a deep copy."""
    pruned: dict[str, Any] = _prune(obj)
    meta = pruned.get("metadata")
    if isinstance(meta, dict):
        for field in ("labels", "annotations"):
            if meta.get(field) == {}:
                del meta[field]  # empty maps of ObjectMeta are omitted too
    return pruned


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


class KubeStore:
    """Objects by resource and (namespace, name); every change bumps the resourceVersion and is recorded."""

    def __init__(self, *, history_limit: int = 10_000,
                 clock: Callable[[], datetime.datetime] = _utc_now) -> None:
        if history_limit < 1:
            raise ValueError(f"history_limit must be at least 1, got {history_limit!r}")
        self.cond = threading.Condition()
        self._clock = clock
        self._history_limit = history_limit
        self._rv = 0
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {name: {} for name in status.RESOURCES}
        self._history: list[Event] = []
        self.floor = 0
        """Events with a resourceVersion at or below this one may be gone: older watches get 410."""

    # -- reading -----------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest change."""
        with self.cond:
            return self._rv

    def get(self, resource: str, name: str, namespace: str = "") -> dict[str, Any]:
        """The stored object (not a copy: do not change it); `ApiStatusError` 404 when absent."""
        rtype = status.resource_type(resource)
        with self.cond:
            obj = self._objects[resource].get((namespace, name))
        if obj is None:
            raise status.not_found(rtype, name)
        return obj

    def list(self, resource: str, namespace: str | None = None,
             match: Matcher | None = None) -> tuple[_Objects, int]:
        """Stored objects sorted by namespace and name (``namespace=None``: all), and the current version."""
        status.resource_type(resource)
        with self.cond:
            found = [obj for (ns, _), obj in sorted(self._objects[resource].items())
                     if (namespace is None or ns == namespace) and (match is None or match(obj))]
            return found, self._rv

    def list_at(self, resource: str, namespace: str | None, match: Matcher | None, rv: int) -> _Objects | None:
        """The objects as they were at ``rv`` (sorted, as `list`), rebuilt from the history; None when it is gone."""
        status.resource_type(resource)
        with self.cond:
            if rv < self.floor:
                return None
            objects = dict(self._objects[resource])
            for event in reversed(self.events_after(rv)):
                if event.resource != resource:
                    continue
                key = (event.namespace, str(_meta(event.new).get("name")))
                if event.type == "ADDED" or event.old is None:
                    objects.pop(key, None)
                else:
                    objects[key] = event.old
            return [obj for (ns, _), obj in sorted(objects.items())
                    if (namespace is None or ns == namespace) and (match is None or match(obj))]

    # -- writing -----------------------------------------------------------------------------
    def create(self, resource: str, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Store a new object; 409 AlreadyExists when the name is taken."""
        rtype = status.resource_type(resource)
        if not isinstance(body, Mapping):
            raise status.ApiStatusError(400, f"the body of a create must be a JSON object, got {body!r}")
        obj = _prune_nulls(body)
        self._check_kind(rtype, obj)
        meta = obj.setdefault("metadata", {})
        ns = self._namespace(rtype, meta, namespace)
        if meta.get("resourceVersion") not in (None, ""):
            # The apiserver answers this with a 500, not a 4xx.
            raise status.ApiStatusError(500, "resourceVersion should not be set on objects to be created")
        with self.cond:
            if not meta.get("name"):
                prefix = meta.get("generateName")
                if not prefix:
                    raise status.ApiStatusError(422, f"a {rtype.kind} needs metadata.name or metadata.generateName")
                meta["name"] = prefix + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            name = meta["name"]
            validation.check(rtype, obj)
            if (ns, name) in self._objects[resource]:
                raise status.already_exists(rtype, name)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=self._timestamp())
            if rtype.namespaced:
                meta["namespace"] = ns
            for transient in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(transient, None)
            obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
            return self._commit(rtype, "ADDED", ns, name, new=obj, old=None)

    def update(self, resource: str, body: Mapping[str, Any], namespace: str | None = None, *,
               name: str | None = None, subresource: str | None = None) -> dict[str, Any]:
        """Replace an object; 409 Conflict when ``metadata.resourceVersion`` is set and stale."""
        rtype = status.resource_type(resource)
        if not isinstance(body, Mapping):
            raise status.ApiStatusError(400, f"the body of an update must be a JSON object, got {body!r}")
        obj = _prune_nulls(body)
        self._check_kind(rtype, obj)
        meta = obj.setdefault("metadata", {})
        ns = self._namespace(rtype, meta, namespace)
        if name is not None and meta.get("name") not in (None, name):
            raise status.ApiStatusError(400, f"the name in the body ({meta.get('name')!r}) does not match "
                                             f"the name in the URL ({name!r})")
        name = name or meta.get("name")
        if not name:
            raise status.ApiStatusError(422, f"a {rtype.kind} update needs metadata.name")
        with self.cond:
            old = self._objects[resource].get((ns, name))
            if old is None:
                raise status.not_found(rtype, name)
            wanted = meta.get("resourceVersion")
            if wanted in (None, "") and not rtype.unconditional_update and subresource != ALL:
                raise status.ApiStatusError(
                    422, f'{rtype.qualified} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0: '
                         "must be specified for an update")
            if wanted not in (None, "") and str(wanted) != _meta(old)["resourceVersion"]:
                raise status.conflict(rtype, name)
            return self._replace(rtype, ns, name, old=old, new=obj, subresource=subresource)

    def patch(self, resource: str, name: str, patch: Any, content_type: str, namespace: str | None = None, *,
              subresource: str | None = None) -> dict[str, Any]:
        """Apply a patch of ``content_type`` (one of `PATCH_TYPES`) atomically."""
        rtype = status.resource_type(resource)
        ns = self._namespace(rtype, {}, namespace)
        apply = PATCH_TYPES.get(content_type.split(";", maxsplit=1)[0].strip())
        if apply is None:
            raise status.ApiStatusError(415, f"the patch type {content_type!r} is not supported; "
                                             f"use one of {sorted(PATCH_TYPES)}")
        with self.cond:
            old = self._objects[resource].get((ns, name))
            if old is None:
                raise status.not_found(rtype, name)
            try:
                new = apply(old, patch)
            except (patches.PatchError, TypeError, AttributeError) as exc:
                raise status.ApiStatusError(422, f"the patch cannot be applied to {rtype.qualified} "
                                                 f'"{name}": {exc}') from exc
            if not isinstance(new, dict):
                raise status.ApiStatusError(422, f"the patch turns {rtype.qualified} \"{name}\" into {new!r}")
            wanted = _meta(new).get("resourceVersion")
            if wanted not in (None, "") and str(wanted) != _meta(old)["resourceVersion"]:
                raise status.conflict(rtype, name)
            return self._replace(rtype, ns, name, old=old, new=_prune_nulls(new), subresource=subresource)

    def delete(self, resource: str, name: str, namespace: str | None = None, *,
               preconditions: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Remove an object (or mark it for deletion while it has finalizers); returns its last state."""
        rtype = status.resource_type(resource)
        ns = self._namespace(rtype, {}, namespace)
        with self.cond:
            old = self._objects[resource].get((ns, name))
            if old is None:
                raise status.not_found(rtype, name)
            meta = _meta(old)
            for field in ("resourceVersion", "uid"):
                wanted = (preconditions or {}).get(field)
                if wanted not in (None, "") and str(wanted) != meta.get(field):
                    raise status.conflict(rtype, name)
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return old
                new = copy_tree(old)
                new["metadata"].update(deletionTimestamp=self._timestamp(), deletionGracePeriodSeconds=0)
                return self._commit(rtype, "MODIFIED", ns, name, new=new, old=old)
            return self._remove(rtype, ns, name, old)

    # -- watch support -----------------------------------------------------------------------
    def events_after(self, rv: int) -> _Events:
        """Recorded events newer than ``rv``, oldest first (call with ``cond`` held)."""
        start = bisect.bisect_right(self._history, rv, key=lambda event: event.rv)
        return self._history[start:]

    def compact(self) -> int:
        """Forget the history: a watch from any earlier version now gets 410 Gone. Returns the floor."""
        with self.cond:
            self._history.clear()
            self.floor = self._rv
            self.cond.notify_all()
            return self.floor

    # -- internals ---------------------------------------------------------------------------
    def _timestamp(self) -> str:
        return self._clock().astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    @staticmethod
    def _check_kind(rtype: status.ResourceType, obj: Mapping[str, Any]) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind not in (None, rtype.kind) or api_version not in (None, rtype.api_version):
            raise status.ApiStatusError(400, f"the body is a {api_version}/{kind} but the URL is for "
                                             f"{rtype.api_version}/{rtype.kind}")

    @staticmethod
    def _namespace(rtype: status.ResourceType, meta: dict[str, Any], namespace: str | None) -> str:
        if not rtype.namespaced:
            return ""
        in_body = meta.get("namespace")
        if namespace and in_body and in_body != namespace:
            raise status.ApiStatusError(400, f"the namespace of the object ({in_body!r}) does not match "
                                             f"the namespace of the request ({namespace!r})")
        ns = namespace or in_body
        if not ns:
            raise status.ApiStatusError(400, f"a {rtype.kind} is namespaced: say which namespace")
        return str(ns)

    def _replace(self, rtype: status.ResourceType, ns: str, name: str, *, old: dict[str, Any],
                 new: dict[str, Any], subresource: str | None) -> dict[str, Any]:
        if rtype.has_status and subresource != ALL:
            if subresource == "status":
                # The apiserver keeps the old spec (every field but metadata and status) on a write to
                # /status, yet takes the new metadata: labels and annotations change there too.
                new = {**{k: v for k, v in copy_tree(old).items() if k != "status"},
                       "metadata": new.get("metadata") or {},
                       **({"status": new["status"]} if "status" in new else {})}
            elif "status" in old:
                new["status"] = copy_tree(old["status"])
            else:
                new.pop("status", None)
        meta = new.setdefault("metadata", {})
        old_meta = _meta(old)
        for field in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        new["apiVersion"], new["kind"] = rtype.api_version, rtype.kind
        if new == old:
            return old  # the apiserver writes nothing (and bumps nothing) for a no-op
        validation.check(rtype, new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(rtype, ns, name, new, previous=old)
        return self._commit(rtype, "MODIFIED", ns, name, new=new, old=old)

    def _remove(self, rtype: status.ResourceType, ns: str, name: str, last: dict[str, Any], *,
                previous: dict[str, Any] | None = None) -> dict[str, Any]:
        """Delete; ``last`` is the final state, ``previous`` the stored one when they differ."""
        del self._objects[rtype.plural][(ns, name)]
        final = copy_tree(last)
        self._rv += 1
        final["metadata"]["resourceVersion"] = str(self._rv)
        self._record(Event(self._rv, "DELETED", rtype.plural, ns, final, previous or last))
        return final

    def _commit(self, rtype: status.ResourceType, kind: str, ns: str, name: str, *, new: dict[str, Any],
                old: dict[str, Any] | None) -> dict[str, Any]:
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        self._objects[rtype.plural][(ns, name)] = new
        self._record(Event(self._rv, kind, rtype.plural, ns, new, old))
        return new

    def _record(self, event: Event) -> None:
        self._history.append(event)
        # Trim in batches so that a full history does not cost a list shift on every write.
        if len(self._history) > self._history_limit + max(1, self._history_limit // 4):
            excess = len(self._history) - self._history_limit
            self.floor = self._history[excess - 1].rv
            del self._history[:excess]
        self.cond.notify_all()
