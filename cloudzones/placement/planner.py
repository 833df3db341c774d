"""The incremental engine behind ``plan_spread``: domain counts, running minimums and lazy heaps.

Nodes whose domains coincide for every constraint form a *cell*; all of a cell's nodes always score
and filter alike, so only its first node by name is ever chosen. Constraints with few domains
(zones) are *coarse*: cells sharing their domains form a *block*, scanned each step (a handful). The
other constraints (hostnames, racks) are *fine*: within a block the cells sit in a heap keyed by
their fine score. Counts only grow, so a heap entry can only be stale by being too low: popping
it, re-scoring it and pushing it back keeps the heap exact without touching the cells a placement
did not reach ("lazy" updates). A cell that breaks a fine DoNotSchedule constraint is parked until
that constraint's global minimum rises far enough, the only event that can make it feasible again.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Sequence

#: Added to the score of a node lacking a ScheduleAnyway key, which kube-scheduler scores last.
MISSING_KEY_PENALTY = 1 << 48
_NO_DOMAIN_MINIMUM = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class ConstraintSpec:
    """A spread constraint reduced to numbers: what the engine needs to filter and score."""

    hard: bool
    max_skew: int
    self_match: int
    """1 when the pod matches its own selector (counts in the skew), else 0."""
    increment: int
    """1 when a placed copy of the pod raises its domain's count, else 0."""
    min_domains: int = 1


class Planner:
    """Places copies of one pod, one at a time, on the best feasible cell.

    ``counts[c][d]`` is the number of matching pods in domain ``d`` of constraint ``c`` (every
    eligible domain, candidates or not); ``slots[n][c]`` is candidate ``n``'s domain for ``c``, -1
    when it lacks a ScheduleAnyway key (it then scores ``MISSING_KEY_PENALTY``). ``max_blocks``
    caps the number of blocks (default: 16 or the square root of the number of cells); the plan
    does not depend on it, only the speed.
    """

    def __init__(self, specs: Sequence[ConstraintSpec], counts: Sequence[Sequence[int]],
                 names: Sequence[str], slots: Sequence[tuple[int, ...]], *, max_blocks: int | None = None) -> None:
        self.specs = list(specs)
        self.counts = [list(c) for c in counts]
        self._hard = [i for i, s in enumerate(self.specs) if s.hard]
        # Running minimum per hard constraint: a histogram of domain counts.
        self._histogram: dict[int, dict[int, int]] = {}
        self._minimum: dict[int, int] = {}
        for c in self._hard:
            histogram: dict[int, int] = {}
            for value in self.counts[c]:
                histogram[value] = histogram.get(value, 0) + 1
            self._histogram[c] = histogram
            self._minimum[c] = min(self.counts[c]) if self.counts[c] else _NO_DOMAIN_MINIMUM
        self._build_cells(names, slots)
        self._split_constraints(max_blocks)
        self._build_blocks()

    # -- set-up ---------------------------------------------------------------------------------
    def _build_cells(self, names: Sequence[str], slots: Sequence[tuple[int, ...]]) -> None:
        first: dict[tuple[int, ...], str] = {}
        for name, slot in zip(names, slots, strict=True):
            if slot not in first or name < first[slot]:
                first[slot] = name
        ordered = sorted(first.items(), key=lambda item: item[1])
        self.cell_slots = [slot for slot, _ in ordered]
        self.cell_names = [name for _, name in ordered]
        self.cell_penalty = [MISSING_KEY_PENALTY if -1 in slot else 0 for slot in self.cell_slots]

    def _split_constraints(self, max_blocks: int | None) -> None:
        # Coarse: constraints with the fewest domains, as long as the blocks they make stay few
        # enough to scan every step; the rest are scored inside each block's heap.
        limit = max(16, math.isqrt(len(self.cell_slots))) if max_blocks is None else max_blocks
        order = sorted(range(len(self.specs)), key=lambda c: (len({s[c] for s in self.cell_slots}), c))
        coarse: list[int] = []
        for c in order:
            if len({tuple(s[g] for g in [*coarse, c]) for s in self.cell_slots}) > limit:
                break
            coarse.append(c)
        self.coarse = sorted(coarse)
        self.fine = [c for c in range(len(self.specs)) if c not in coarse]
        self._coarse_hard = [c for c in self.coarse if self.specs[c].hard]
        self._fine_hard = [c for c in self.fine if self.specs[c].hard]

    def _build_blocks(self) -> None:
        index: dict[tuple[int, ...], int] = {}
        self.block_slots: list[tuple[int, ...]] = []
        self.block_heaps: list[list[tuple[int, str, int]]] = []
        self.cell_block: list[int] = []
        for cell, slot in enumerate(self.cell_slots):
            key = tuple(slot[c] for c in self.coarse)
            if key not in index:
                index[key] = len(self.block_slots)
                self.block_slots.append(key)
                self.block_heaps.append([])
            self.cell_block.append(index[key])
            self.block_heaps[index[key]].append((self._fine_score(cell), self.cell_names[cell], cell))
        for heap in self.block_heaps:
            heapq.heapify(heap)
        # Cells breaking a fine hard constraint, by the minimum that would readmit them.
        self._parked: dict[int, list[tuple[int, str, int]]] = {c: [] for c in self._fine_hard}

    # -- scoring and filtering ------------------------------------------------------------------
    def effective_minimum(self, c: int) -> int:
        """The global minimum the skew of constraint ``c`` is measured against."""
        if not self.counts[c]:
            return _NO_DOMAIN_MINIMUM
        if len(self.counts[c]) < self.specs[c].min_domains:
            return 0
        return self._minimum[c]

    def _fine_score(self, cell: int) -> int:
        slot = self.cell_slots[cell]
        counts = self.counts
        return self.cell_penalty[cell] + sum(counts[c][slot[c]] for c in self.fine if slot[c] >= 0)

    def _excess(self, c: int, domain: int) -> int:
        """How far the global minimum of ``c`` must rise before ``domain`` accepts a copy (≤ 0: now)."""
        spec = self.specs[c]
        return self.counts[c][domain] + spec.self_match - spec.max_skew - self.effective_minimum(c)

    def admits(self, c: int, domain: int) -> bool:
        """Whether hard constraint ``c`` alone would accept a copy in ``domain`` now."""
        return self._excess(c, domain) <= 0

    def _block_score(self, block: int) -> int | None:
        """The coarse part of the block's score, or None when a coarse hard constraint rejects it."""
        slot = self.block_slots[block]
        for position, c in enumerate(self.coarse):
            if c in self._coarse_hard and self._excess(c, slot[position]) > 0:
                return None
        return sum(self.counts[c][slot[p]] for p, c in enumerate(self.coarse) if slot[p] >= 0)

    def _peek(self, block: int) -> tuple[int, str, int] | None:
        """The block's best feasible cell as (fine score, name, cell), cleaning stale entries on the way."""
        heap = self.block_heaps[block]
        while heap:
            stored, name, cell = heap[0]
            actual = self._fine_score(cell)
            if actual != stored:
                heapq.heapreplace(heap, (actual, name, cell))
                continue
            slot = self.cell_slots[cell]
            for c in self._fine_hard:
                excess = self._excess(c, slot[c])
                if excess > 0:
                    heapq.heappop(heap)
                    heapq.heappush(self._parked[c], (self.effective_minimum(c) + excess, name, cell))
                    break
            else:
                return heap[0]
        return None

    # -- placing --------------------------------------------------------------------------------
    def choose(self) -> int | None:
        """The cell the next copy goes to (lowest score, then name), or None when none is feasible."""
        best: tuple[int, str, int] | None = None
        for block in range(len(self.block_slots)):
            coarse = self._block_score(block)
            if coarse is None:
                continue
            top = self._peek(block)
            if top is None:
                continue
            candidate = (coarse + top[0], top[1], top[2])
            if best is None or candidate < best:
                best = candidate
        return None if best is None else best[2]

    def place(self, cell: int) -> None:
        """Count one more copy of the pod in every domain of ``cell``."""
        slot = self.cell_slots[cell]
        raised: list[int] = []
        for c, spec in enumerate(self.specs):
            domain = slot[c]
            if not spec.increment or domain < 0:
                continue
            old = self.counts[c][domain]
            self.counts[c][domain] = old + 1
            if spec.hard:
                histogram = self._histogram[c]
                histogram[old] -= 1
                histogram[old + 1] = histogram.get(old + 1, 0) + 1
                if old == self._minimum[c] and not histogram[old]:
                    self._minimum[c] = old + 1
                    raised.append(c)
        for c in raised:
            parked = self._parked.get(c)
            threshold = self.effective_minimum(c)
            while parked and parked[0][0] <= threshold:
                _, name, back = heapq.heappop(parked)
                heapq.heappush(self.block_heaps[self.cell_block[back]], (self._fine_score(back), name, back))

    def run(self, count: int) -> list[str]:
        """Names of the nodes for up to ``count`` copies, stopping early when nothing is feasible."""
        chosen: list[str] = []
        for _ in range(count):
            cell = self.choose()
            if cell is None:
                break
            chosen.append(self.cell_names[cell])
            self.place(cell)
        return chosen
