"""Validation findings shared by every workload plan: an error, warning or note, the rule it comes from, and why."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cloudzones import errors


class Severity(str, enum.Enum):
    """How bad a finding is; only errors make a plan fail (exit 1)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One result of validating a workload plan."""

    severity: Severity
    rule: str
    """Short stable name of the rule (``factor-exceeds-zones``), for tests and for grepping."""
    message: str
    """Plain words, with the offending values."""
    subject: str = ""
    """What the finding is about (a component, process, volume, node), ``""`` for the whole plan."""

    def as_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"severity": self.severity.value, "rule": self.rule, "subject": self.subject,
                "message": self.message}


def error(rule: str, message: str, subject: str = "") -> Finding:
    """An error finding."""
    return Finding(Severity.ERROR, rule, message, subject)


def warning(rule: str, message: str, subject: str = "") -> Finding:
    """A warning finding."""
    return Finding(Severity.WARNING, rule, message, subject)


def info(rule: str, message: str, subject: str = "") -> Finding:
    """An informational finding."""
    return Finding(Severity.INFO, rule, message, subject)


def errors_in(items: Iterable[Finding]) -> list[Finding]:
    """The error findings among ``items``, in order."""
    return [f for f in items if f.severity is Severity.ERROR]


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
