"""The one placement core every decision goes through: spread, distributed selection, locality, tolerance (pure)."""

from __future__ import annotations

from cloudzones.placement.distributed import Candidate, choose_distributed
from cloudzones.placement.locality import Replica, replica_to_remove
from cloudzones.placement.spread import feasible_nodes, plan_spread
from cloudzones.placement.tolerance import FailureReport, failure_report, tolerated_zone_failures

__all__ = [
    "Candidate",
    "FailureReport",
    "Replica",
    "choose_distributed",
    "failure_report",
    "feasible_nodes",
    "plan_spread",
    "replica_to_remove",
    "tolerated_zone_failures",
]
