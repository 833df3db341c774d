"""The resources the fake API server serves and the ``Status`` errors it answers with."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class ResourceType:
    """One served resource: where it lives in the URL space and what its objects are called."""

    plural: str
    kind: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = False
    has_status: bool = False
    """Writes to the main resource keep ``status``; only ``/status`` changes it (as the apiserver does)."""
    returns_deleted: bool = False
    """A DELETE that removes the object answers with it; otherwise with a ``Status`` of Success."""
    field_labels: tuple[str, ...] = ("metadata.name", "metadata.namespace")
    """The field selector labels the apiserver accepts for this resource."""
    unconditional_update: bool = True
    """Whether an update without ``metadata.resourceVersion`` replaces the object (else it is 422)."""
    known_fields_message: bool = True
    """Whether an unsupported field label is refused as "not a known field selector" (else "not supported")."""

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``<group>/<version>`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``leases.coordination.k8s.io``, or the plural alone for the core group, as messages say it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: dict[str, ResourceType] = {
    r.plural: r
    for r in (
        ResourceType("nodes", "Node", has_status=True, field_labels=("metadata.name", "spec.unschedulable"),
                     known_fields_message=False),
        ResourceType("persistentvolumes", "PersistentVolume", has_status=True, returns_deleted=True),
        ResourceType("persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True, has_status=True,
                     returns_deleted=True),
        ResourceType("pods", "Pod", namespaced=True, has_status=True, returns_deleted=True, known_fields_message=False,
                     field_labels=("metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
                                   "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
                                   "status.phase", "status.podIP", "status.nominatedNodeName")),
        ResourceType("events", "Event", namespaced=True, known_fields_message=False,
                     field_labels=("metadata.name", "metadata.namespace", "involvedObject.kind",
                                   "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                                   "involvedObject.apiVersion", "involvedObject.resourceVersion",
                                   "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")),
        ResourceType("storageclasses", "StorageClass", group="storage.k8s.io", returns_deleted=True),
        ResourceType("leases", "Lease", group="coordination.k8s.io", namespaced=True, unconditional_update=False),
        ResourceType("statefulsets", "StatefulSet", group="apps", namespaced=True, has_status=True,
                     returns_deleted=True),
    )
}
"""Every resource the fake serves, by plural name."""

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def resource_type(plural: str) -> ResourceType:
    """The served resource called ``plural``; `KeyError` naming it when the fake does not serve it."""
    try:
        return RESOURCES[plural]
    except KeyError:
        raise KeyError(f"the fake API server does not serve {plural!r}; it serves {sorted(RESOURCES)}") from None


class ApiStatusError(Exception):
    """A request the fake refuses; becomes an HTTP error with a ``Status`` body (or a watch ERROR event)."""

    def __init__(self, code: int, message: str, *, reason: str | None = None,
                 details: dict[str, Any] | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = _REASONS.get(code, "Unknown") if reason is None else reason
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        """The ``meta/v1 Status`` object the apiserver would send."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            **({"reason": self.reason} if self.reason else {}),
            "code": self.code,
        }
        details = dict(self.details or {})
        if self.retry_after is not None:
            details["retryAfterSeconds"] = int(self.retry_after)
        if details:
            body["details"] = details
        return body


def not_found(rtype: ResourceType, name: str) -> ApiStatusError:
    """404 for a named object, worded like the apiserver."""
    return ApiStatusError(404, f'{rtype.qualified} "{name}" not found',
                          details={"name": name, "group": rtype.group, "kind": rtype.plural})


def conflict(rtype: ResourceType, name: str) -> ApiStatusError:
    """409 for a write based on a stale resourceVersion (or a failed precondition)."""
    return ApiStatusError(
        409,
        f'Operation cannot be fulfilled on {rtype.qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details={"name": name, "group": rtype.group, "kind": rtype.plural},
    )


def already_exists(rtype: ResourceType, name: str) -> ApiStatusError:
    """409 AlreadyExists for a create of a name that is taken."""
    return ApiStatusError(409, f'{rtype.qualified} "{name}" already exists', reason="AlreadyExists",
                          details={"name": name, "group": rtype.group, "kind": rtype.plural})


def expired(requested: int, oldest: int) -> ApiStatusError:
    """410 for a watch that starts (or has fallen) before the retained history."""
    return ApiStatusError(410, f"too old resource version: {requested} ({oldest})")


def deleted(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """What a DELETE that removed ``obj`` answers: the object, or a ``Status`` of Success naming it."""
    if rtype.returns_deleted:
        return obj
    meta = obj.get("metadata") or {}
    details: dict[str, Any] = {"name": meta.get("name", "")}
    if rtype.group:
        details["group"] = rtype.group
    details.update(kind=rtype.plural, uid=meta.get("uid", ""))
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
