"""Findings: an error, warning or note about an input, the rule it comes from, and why (pure, a leaf module).

The planners in `cloudzones.workloads` produce them and `cloudzones.errors.InvalidWorkloadSpec`
carries them; this module imports nothing of cloudzones, so the error tree stays at the bottom.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable


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


def errors_in(items: Iterable[Finding]) -> list[Finding]:
    """The error findings among ``items``, in order."""
    return [f for f in items if f.severity is Severity.ERROR]
