"""Choose candidates spread over locality fields under hard per-value limits (coordinator selection).

Order of concerns, each breaking the previous one's ties: (1) hard limits, and as many picks as
they allow (a pick is only taken if the rest can still be completed); (2) balance at every prefix:
the next pick uses the least-used value of each field, fields compared in the order given (earlier
fields matter more, as in FoundationDB, which relaxes the last field first); (3) higher priority;
(4) id. FoundationDB instead fills data halls one after another and gets its 3/3/3 split only from
the data_hall hard limit; here the first three of nine picks are already in three halls.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from cloudzones import errors
from cloudzones.placement import capacity


@dataclasses.dataclass(frozen=True)
class Candidate:
    """Something that can be chosen (an FDB process): an id, its localities, a priority (higher first)."""

    id: str
    locality: Mapping[str, str] = dataclasses.field(hash=False)
    """Field → value, e.g. ``{"zoneid": "z1", "data_hall": "A"}``; a missing field reads as ``""``."""
    priority: int = 0


def choose_distributed(candidates: Iterable[Candidate], count: int, *, fields: Sequence[str] = ("zoneid",),
                       hard_limits: Mapping[str, int] | None = None) -> list[Candidate]:
    """Pick ``count`` candidates spreading every field as evenly as possible at every prefix.

    No value of a field in ``hard_limits`` is used more than its limit (a limited field need not
    be listed in ``fields``, which only drives the balance). The result does not depend on the
    order of ``candidates``. Raises `NotEnoughCandidates` whose ``.chosen`` is the largest valid
    partial list (exact with up to two limited fields) and `InvalidPlacementSpec` for a bad
    argument (negative count, limit below 1, repeated id).
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise errors.InvalidPlacementSpec(f"count must be a non-negative integer, got {count!r}")
    balance_fields = tuple(dict.fromkeys(_field_names(fields)))
    limits = _limits(hard_limits)
    limited = sorted(limits)
    pool = _pool(candidates)
    used: dict[str, Counter[str]] = {f: Counter() for f in (*balance_fields, *limited)}

    def value(candidate: Candidate, field: str) -> str:
        return str(candidate.locality.get(field, ""))

    def room_after(remaining: Sequence[Candidate], taken: Candidate | None, cap: int) -> int:
        """How many more picks the hard limits allow once ``taken`` (if any) is picked too."""
        rows = [tuple(value(c, f) for f in limited) for c in remaining if c is not taken]
        capacities = []
        for i, f in enumerate(limited):
            extra = value(taken, f) if taken is not None else None
            capacities.append({row[i]: limits[f] - used[f][row[i]] - (row[i] == extra) for row in rows})
        return capacity.max_selectable(rows, capacities, cap)

    remaining = sorted(pool, key=lambda c: (-c.priority, c.id))
    target = room_after(remaining, None, count)
    chosen: list[Candidate] = []
    while len(chosen) < target:
        needed = target - len(chosen) - 1
        eligible = [c for c in remaining if all(used[f][value(c, f)] < limits[f] for f in limited)]
        eligible.sort(key=lambda c: (tuple(used[f][value(c, f)] for f in balance_fields), -c.priority, c.id))
        pick = next((c for c in eligible if needed == 0 or room_after(remaining, c, needed) >= needed), None)
        if pick is None:
            break  # only with three or more limited fields, where the look-ahead is an upper bound
        chosen.append(pick)
        remaining.remove(pick)
        for f, per_value in used.items():
            per_value[value(pick, f)] += 1
    if len(chosen) < count:
        reason = _shortfall(pool, count, limits, value)
        raise errors.NotEnoughCandidates(
            f"could only choose {len(chosen)} candidate(s), but {count} are required: {reason}",
            chosen=chosen, required=count)
    return chosen


def _shortfall(pool: Sequence[Candidate], count: int, limits: Mapping[str, int],
               value: Callable[[Candidate, str], str]) -> str:
    """What ran out, in plain words."""
    if len(pool) < count:
        return f"only {len(pool)} candidate(s) were given"
    reasons = []
    for field in sorted(limits):
        per_value = Counter(value(c, field) for c in pool)
        bound = sum(min(n, limits[field]) for n in per_value.values())
        if bound < count:
            shown = ", ".join(repr(v) for v in sorted(per_value)[:10]) + (" …" if len(per_value) > 10 else "")
            reasons.append(f"field {field!r} is limited to {limits[field]} per value and the candidates have "
                           f"{len(per_value)} distinct value(s) ({shown}), which allows at most {bound}")
    if reasons:
        return "; ".join(reasons)
    return "the hard limits on " + " and ".join(repr(f) for f in sorted(limits)) + " together allow no more"


def _field_names(fields: Sequence[str]) -> list[str]:
    if isinstance(fields, str):
        raise errors.InvalidPlacementSpec(f"fields must be a sequence of field names, not the string {fields!r}")
    names = list(fields)
    for name in names:
        if not isinstance(name, str) or not name:
            raise errors.InvalidPlacementSpec(f"field names must be non-empty strings, got {name!r}")
    return names


def _limits(hard_limits: Mapping[str, int] | None) -> dict[str, int]:
    limits = dict(hard_limits or {})
    for field, limit in limits.items():
        if not isinstance(field, str) or not field:
            raise errors.InvalidPlacementSpec(f"hard limit field names must be non-empty strings, got {field!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise errors.InvalidPlacementSpec(f"hard limit for {field!r} must be a positive integer, got {limit!r}")
    return limits


def _pool(candidates: Iterable[Candidate]) -> list[Candidate]:
    pool = list(candidates)
    seen: set[str] = set()
    for candidate in pool:
        if not isinstance(candidate, Candidate):
            raise errors.InvalidPlacementSpec(f"candidates must be Candidate objects, got {candidate!r}")
        if candidate.id in seen:
            raise errors.InvalidPlacementSpec(f"candidate id {candidate.id!r} appears more than once")
        seen.add(candidate.id)
    return pool
