"""How many zone losses a zone-aware replicated store survives (the grafana/dskit ring rules).

dskit puts one replica of each key per zone, in at most ``rf`` zones, so with fewer zones than the
replication factor only ``zones`` replicas exist. A write needs ``rf // 2 + 1`` of them (per-key
quorum, measured against ``rf``), so ``(rf=3, zones=2)`` tolerates no zone loss for writes while
reads, which dskit checks ring-wide as ``floor(min(zones, rf) / 2)`` unavailable zones, still
tolerate one.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping

from cloudzones import errors


def tolerated_zone_failures(replication_factor: int, zones: int) -> int:
    """Zones that may be lost while every key keeps a quorum (``rf // 2 + 1``) of its replicas.

    Replicas are placed one per zone, so only ``min(zones, rf)`` exist: ``(3, 3)`` → 1,
    ``(3, 2)`` → 0, ``(5, 5)`` → 2, ``(4, 4)`` → 1.
    """
    _check(replication_factor, zones)
    return max(0, min(zones, replication_factor) - quorum(replication_factor))


def quorum(replication_factor: int) -> int:
    """Replicas a write must reach: ``rf // 2 + 1``."""
    return replication_factor // 2 + 1


@dataclasses.dataclass(frozen=True)
class FailureReport:
    """Zone-failure tolerance of one replicated workload placed over zones."""

    replication_factor: int
    zones: tuple[str, ...]
    """Zones holding at least one instance, sorted."""
    instances_per_zone: tuple[tuple[str, int], ...]
    """(zone, instances) for each of ``zones``."""
    replicas_per_key: int
    """``min(len(zones), rf)``: one replica of each key per zone."""
    quorum: int
    """``rf // 2 + 1`` replicas for a write."""
    write_zone_failures: int
    """Zones that may be lost with writes still reaching quorum (`tolerated_zone_failures`)."""
    read_zone_failures: int
    """Zones that may be unavailable for reads: dskit's ``floor(min(zones, rf) / 2)``."""
    writes_possible: bool
    """False when even with every zone up a key has fewer replicas than the quorum."""
    notes: tuple[str, ...] = ()
    """Plain-words warnings about the placement."""


def failure_report(placement: Mapping[str, int] | Iterable[str], replication_factor: int) -> FailureReport:
    """Read and write zone-failure tolerance for instances placed over zones.

    ``placement`` is either zone → number of instances, or one zone name per instance.
    """
    if isinstance(placement, Mapping):
        per_zone: Counter[str] = Counter()
        for zone, n in placement.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise errors.InvalidPlacementSpec(
                    f"instances in zone {zone!r} must be a non-negative integer, got {n!r}")
            if n:
                per_zone[str(zone)] += n
    else:
        if isinstance(placement, str):
            raise errors.InvalidPlacementSpec(f"placement must list zones, not be the string {placement!r}")
        per_zone = Counter(str(zone) for zone in placement)
    zones = tuple(sorted(per_zone))
    _check(replication_factor, len(zones))
    holding = min(len(zones), replication_factor)
    needed = quorum(replication_factor)
    notes = []
    if "" in per_zone:
        notes.append(f"{per_zone['']} instance(s) have no zone; they are counted as one zone named ''")
    if not zones:
        notes.append("no instances: nothing can be read or written")
    elif holding < needed:
        notes.append(f"{len(zones)} zone(s) for replication factor {replication_factor}: each key has "
                     f"{holding} replica(s) but writes need {needed}, so writes fail even with every zone up")
    elif len(zones) < replication_factor:
        notes.append(f"{len(zones)} zone(s) for replication factor {replication_factor}: each key has only "
                     f"{holding} replicas, so writes tolerate {holding - needed} zone loss(es) instead of "
                     f"{replication_factor - needed}")
    if replication_factor % 2 == 0 and replication_factor >= 2:
        notes.append(f"an even replication factor ({replication_factor}) tolerates no more write-side zone "
                     f"losses than {replication_factor - 1}")
    return FailureReport(
        replication_factor=replication_factor, zones=zones,
        instances_per_zone=tuple((z, per_zone[z]) for z in zones), replicas_per_key=holding, quorum=needed,
        write_zone_failures=max(0, holding - needed), read_zone_failures=holding // 2,
        writes_possible=bool(zones) and holding >= needed, notes=tuple(notes))


def _check(replication_factor: int, zones: int) -> None:
    if isinstance(replication_factor, bool) or not isinstance(replication_factor, int) or replication_factor < 1:
        raise errors.InvalidPlacementSpec(f"replication factor must be a positive integer, got {replication_factor!r}")
    if isinstance(zones, bool) or not isinstance(zones, int) or zones < 0:
        raise errors.InvalidPlacementSpec(f"zones must be a non-negative integer, got {zones!r}")
