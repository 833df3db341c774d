"""Findings helpers shared by every workload plan (the `Finding` itself lives in the core, `cloudzones.findings`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cloudzones import errors
from cloudzones.findings import Finding, Severity, error, errors_in

__all__ = ["Finding", "Severity", "as_dicts", "error", "errors_in", "has_errors", "info", "invalid", "json_dict",
           "jsonable", "raise_for_errors", "warning"]


def warning(rule: str, message: str, subject: str = "") -> Finding:
    """A warning finding."""
    return Finding(Severity.WARNING, rule, message, subject)


def info(rule: str, message: str, subject: str = "") -> Finding:
    """An informational finding."""
    return Finding(Severity.INFO, rule, message, subject)


def raise_for_errors(items: Sequence[Finding], what: str) -> None:
    """Raise `InvalidWorkloadSpec` carrying every error finding, when there is one."""
    found = errors_in(items)
    if found:
        details = "; ".join(f"{f.subject + ': ' if f.subject else ''}{f.message}" for f in found)
        raise errors.InvalidWorkloadSpec(f"{what}: {len(found)} error(s): {details}", findings=found)


def invalid(rule: str, message: str, subject: str = "") -> errors.InvalidWorkloadSpec:
    """An `InvalidWorkloadSpec` for one malformed input, carrying that one error finding."""
    return errors.InvalidWorkloadSpec(f"{subject + ': ' if subject else ''}{message}",
                                      findings=[error(rule, message, subject)])


def as_dicts(items: Iterable[Finding]) -> list[dict[str, str]]:
    """JSON-ready findings."""
    return [f.as_dict() for f in items]


def has_errors(items: Iterable[Finding]) -> bool:
    """Whether any finding is an error."""
    return any(f.severity is Severity.ERROR for f in items)


def json_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping made JSON-ready by `jsonable`."""
    return {str(k): jsonable(v) for k, v in value.items()}


def jsonable(value: Any) -> Any:
    """Tuples to lists, recursively, so JSON and YAML dumps agree."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
