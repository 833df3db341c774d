"""Which extra replica to delete when a volume keeps a local one (Longhorn data locality, made deterministic).

Longhorn (``getPreferredReplicaCandidatesForDeletion``) groups the healthy replicas by disk, then
node, then zone, takes the largest group with more than one member, else all replicas, and deletes
the first by name that is not on the engine's node. Two differences here: equal-sized groups are
ordered by their key instead of Go's random map order, and a replica on the engine's node may go
when another replica stays there (Longhorn would delete nothing if the crowded disk were local).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from cloudzones import errors


@dataclasses.dataclass(frozen=True, order=True)
class Replica:
    """A healthy replica: its name, node, disk (``""``: unknown) and zone (``""``: unknown)."""

    name: str
    node: str
    disk: str = ""
    zone: str = ""


def _disk(replica: Replica) -> tuple[str, ...] | None:
    # A disk is node + disk; an unknown disk shares a disk with nothing.
    return (replica.node, replica.disk) if replica.disk and replica.node else None


def _node(replica: Replica) -> tuple[str, ...] | None:
    return (replica.node,) if replica.node else None


def _zone(replica: Replica) -> tuple[str, ...] | None:
    return (replica.zone,) if replica.zone else None


_LEVELS: tuple[tuple[str, Callable[[Replica], tuple[str, ...] | None]], ...] = (
    ("disk", _disk), ("node", _node), ("zone", _zone))


def replica_to_remove(replicas: Sequence[Replica], engine_node: str) -> Replica:
    """The replica to delete when one too many are healthy, never the last one on ``engine_node``.

    Prefers a replica sharing a disk with another, then a node, then a zone; among equally large
    groups the one with the smallest key (node, disk / node / zone) is taken; inside a group the
    first by name. The answer does not depend on the order of ``replicas``. Fewer than two
    replicas → `InvalidPlacementSpec` (a ValueError).
    """
    for replica in replicas:
        if not isinstance(replica, Replica):
            raise errors.InvalidPlacementSpec(f"replicas must be Replica objects, got {replica!r}")
    pool = sorted(replicas)
    if len(pool) < 2:
        raise errors.InvalidPlacementSpec(
            f"need at least two replicas to remove one, got {len(pool)}: {[r.name for r in pool]}")
    local = sum(1 for r in pool if r.node == engine_node)
    group = _crowded_group(pool)
    for replica in group:
        if replica.node != engine_node or local > 1:
            return replica
    # Unreachable: a group has two or more members and at most one of them is the lone local replica.
    raise AssertionError(f"no removable replica in {group!r}")


def _crowded_group(pool: Sequence[Replica]) -> list[Replica]:
    """The largest group with more than one member at the first level that has one, else everything."""
    for _, key_of in _LEVELS:
        groups: dict[tuple[str, ...], list[Replica]] = {}
        for replica in pool:
            key = key_of(replica)
            if key is not None:
                groups.setdefault(key, []).append(replica)
        crowded = [(key, members) for key, members in groups.items() if len(members) > 1]
        if crowded:
            _, members = min(crowded, key=lambda item: (-len(item[1]), item[0]))
            return members
    return list(pool)
