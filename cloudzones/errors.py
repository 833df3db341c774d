"""The exceptions cloudzones raises: one root, ``CloudZonesError``, and a small tree below it.

We keep our own tree over the HTTP clients' errors (requests, azure-core, kubernetes) so that
callers catch one family whatever transport is underneath; the original error is always
chained as ``__cause__``.

::

    CloudZonesError
    ├── InvalidZone (ValueError)          a zone id / zone label cannot be parsed
    ├── InvalidResourceId (ValueError)    malformed provider ID, ARM ID, disk URI, VMSS name
    ├── ConfigError (ValueError)          a cloud config or setting is invalid
    │   └── UsageError                    a command line asks for something impossible (exit 2)
    ├── InvalidStorageClass (ValueError)  a StorageClass breaks a rule
    ├── NodeNotFound (LookupError)        the cloud has no instance for that node
    ├── ZoneUnavailable                   the instance exists but reports neither zone nor fault domain
    ├── MetadataError                     instance metadata unreachable, refused or malformed
    ├── CloudApiError                     an ARM call failed (.status, .retry_after)
    ├── KubeApiError                      a Kubernetes API call failed (.status, .retry_after, .reason)
    │   ├── KubeConflict                  409: the object changed under us
    │   │   └── KubeAlreadyExists         409: a create found the name taken
    │   ├── KubeNotFound (LookupError)    404: no such object
    │   └── KubeGone                      410: a watch's resourceVersion is too old; list again
    ├── NoZonedNodes                      a zoned volume must be placed but no zone is known
    ├── NotEnoughCandidates               a placement cannot reach .required (.chosen)
    ├── InvalidPlacementSpec (ValueError) a placement request is malformed (spread constraint, selector, count)
    └── InvalidWorkloadSpec (ValueError)  a workload plan's input breaks a rule (.findings)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cloudzones.findings import Finding


class CloudZonesError(Exception):
    """Root of every error cloudzones raises on purpose."""


class InvalidZone(CloudZonesError, ValueError):
    """A zone id or zone label cannot be parsed."""


class InvalidResourceId(CloudZonesError, ValueError):
    """A provider ID, ARM resource ID, disk URI or VMSS computer name is malformed."""


class ConfigError(CloudZonesError, ValueError):
    """A configuration value (cloud config, CLI setting, scenario) is invalid."""


class UsageError(ConfigError):
    """A command line asks for something that cannot be done (exit 2, like argparse's own usage errors)."""


class InvalidStorageClass(CloudZonesError, ValueError):
    """A StorageClass breaks a rule; the message names the rule and the offending parameters."""

    def __init__(self, message: str, *, rule: str = "") -> None:
        super().__init__(message)
        self.rule = rule
        """The short name of the rule that was broken (``zone-and-zones``), when known."""


class NodeNotFound(CloudZonesError, LookupError):
    """The cloud has no instance for that node name or provider ID."""


class FetchInProgress(CloudZonesError):
    """What this lookup needs is being fetched by another thread; the caller's ``on_busy`` will be called when
    it is in. Lets a worker go on with other work instead of queueing behind the fetch."""


class ZoneUnavailable(CloudZonesError):
    """The instance exists but reports neither an availability zone nor a fault domain (yet)."""


class MetadataError(CloudZonesError):
    """Instance metadata is unreachable, refused, throttled past the retry budget, or malformed."""


class _StatusError(CloudZonesError):
    """An API call that failed with an HTTP status (when one was received)."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status, or None when no response arrived."""
        self.retry_after = retry_after
        """Seconds the server asked us to wait before trying again, when it said so."""


class CloudApiError(_StatusError):
    """An Azure Resource Manager call failed."""


class KubeApiError(_StatusError):
    """A Kubernetes API call failed."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None,
                 reason: str = "") -> None:
        super().__init__(message, status=status, retry_after=retry_after)
        self.reason = reason
        """The ``reason`` of the apiserver's ``Status`` (``Conflict``, ``AlreadyExists``, ...), when it sent one."""


class KubeConflict(KubeApiError):
    """The object changed since it was read (HTTP 409)."""


class KubeAlreadyExists(KubeConflict):
    """A create found the name already taken (HTTP 409, reason ``AlreadyExists``)."""


class KubeNotFound(KubeApiError, LookupError):
    """The object does not exist (HTTP 404)."""


class KubeGone(KubeApiError):
    """The requested resourceVersion is older than the server keeps (HTTP 410): list again, then watch."""


class NoZonedNodes(CloudZonesError):
    """A zoned volume must be placed but no zone can be determined."""

    def __init__(self, message: str, *, rule: str = "") -> None:
        super().__init__(message)
        self.rule = rule
        """The short name of the zone-choice rule that could not decide (``selected-node``), when known."""


class NotEnoughCandidates(CloudZonesError):
    """A placement cannot reach ``required``; ``chosen`` holds the largest valid partial result."""

    def __init__(self, message: str, *, chosen: Sequence[Any], required: int) -> None:
        super().__init__(message)
        self.chosen: list[Any] = list(chosen)
        self.required = required


class InvalidPlacementSpec(CloudZonesError, ValueError):
    """A placement request is malformed: a spread constraint, label selector, count or candidate list."""


class InvalidWorkloadSpec(CloudZonesError, ValueError):
    """A workload plan's input (Loki replication, FoundationDB localities, Longhorn volume) breaks a rule.

    ``findings`` holds every error found, not only the first, so a user can fix them in one go.
    """

    def __init__(self, message: str, *, findings: Sequence[Finding] = ()) -> None:
        super().__init__(message)
        self.findings: tuple[Finding, ...] = tuple(findings)
        """The error `Finding`s (rule, subject, message) behind this exception."""
