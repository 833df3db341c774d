"""The incremental engine behind ``plan_spread``: domain counts, running minimums and a tree of lazy heaps.

Nodes whose domains coincide for every constraint form a *cell*; a cell's nodes always score and
filter alike, so only its first node by name is ever chosen. Constraints with few domains (zones)
are *coarse*: cells sharing their domains form a *block*, and the blocks are scanned every step (a
handful). The other constraints (racks, hostnames) are *fine*, fewest domains first: below a block
there is one tree level per fine constraint, each tree node a domain of it, with the cells as
leaves. Each tree node keeps a heap of its children keyed by (score of the child's subtree, name
of the best node in it).

Counts only grow, so a stored key can only be stale by being too low: popping it, re-scoring it
and pushing it back keeps every heap exact without visiting the subtrees a placement did not
reach. A subtree whose domain breaks a DoNotSchedule constraint is parked until that constraint's
global minimum rises far enough (the only way it can become feasible again); when it comes back,
fresh entries are pushed up its ancestors, and per-node tokens void their older entries.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
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


class _Node:
    """A block (``constraint`` -1), a domain of a fine constraint, or a cell (``heap`` None)."""

    __slots__ = ("cell", "constraint", "domain", "heap", "parent", "parked", "token")

    def __init__(self, constraint: int, domain: int, parent: _Node | None, cell: int = -1) -> None:
        self.constraint = constraint
        self.domain = domain
        self.parent = parent
        self.cell = cell
        self.heap: list[tuple[int, str, int, _Node]] | None = [] if cell < 0 else None
        self.token = 0
        self.parked = False


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
        self._hard = [s.hard for s in self.specs]
        # Running minimum per hard constraint: a histogram of domain counts.
        self._histogram: dict[int, dict[int, int]] = {}
        self._minimum: dict[int, int] = {}
        for c, spec in enumerate(self.specs):
            if spec.hard:
                histogram: dict[int, int] = {}
                for value in self.counts[c]:
                    histogram[value] = histogram.get(value, 0) + 1
                self._histogram[c] = histogram
                self._minimum[c] = min(self.counts[c]) if self.counts[c] else _NO_DOMAIN_MINIMUM
        self._parked: dict[int, list[tuple[int, int, _Node]]] = {c: [] for c in self._histogram}
        self._sequence = itertools.count()
        self._build_cells(names, slots)
        self._split_constraints(max_blocks)
        self._build_tree()

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
        # enough to scan every step. Fine: the rest, one tree level each, fewest domains on top.
        limit = max(16, math.isqrt(len(self.cell_slots))) if max_blocks is None else max_blocks
        order = sorted(range(len(self.specs)), key=lambda c: (len({s[c] for s in self.cell_slots}), c))
        coarse: list[int] = []
        for c in order:
            if len({tuple(s[g] for g in [*coarse, c]) for s in self.cell_slots}) > limit:
                break
            coarse.append(c)
        self.coarse = sorted(coarse)
        self.fine = [c for c in order if c not in coarse]

    def _build_tree(self) -> None:
        blocks: dict[tuple[int, ...], _Node] = {}
        children: dict[_Node, dict[int, _Node]] = {}
        for cell, slot in enumerate(self.cell_slots):
            key = tuple(slot[c] for c in self.coarse)
            node = blocks.setdefault(key, _Node(-1, -1, None))
            for c in self.fine:
                below = children.setdefault(node, {})
                node = below.setdefault(slot[c], _Node(c, slot[c], node))
            children.setdefault(node, {})[-2 - cell] = _Node(-1, -1, node, cell)
        self.blocks = list(blocks.values())
        self.block_slots = list(blocks)

        def fill(node: _Node) -> tuple[int, str]:
            # Initial keys ignore feasibility: that can only make them too low, which is allowed.
            assert node.heap is not None
            for child in children[node].values():
                best = (0, self.cell_names[child.cell]) if child.heap is None else fill(child)
                node.heap.append((self._own(child) + best[0], best[1], 0, child))
            heapq.heapify(node.heap)
            return node.heap[0][0], node.heap[0][1]

        for block in self.blocks:
            fill(block)

    # -- scoring and filtering ------------------------------------------------------------------
    def effective_minimum(self, c: int) -> int:
        """The global minimum the skew of constraint ``c`` is measured against."""
        if not self.counts[c]:
            return _NO_DOMAIN_MINIMUM
        if len(self.counts[c]) < self.specs[c].min_domains:
            return 0
        return self._minimum[c]

    def _excess(self, c: int, domain: int) -> int:
        """How far the global minimum of ``c`` must rise before ``domain`` accepts a copy (≤ 0: now)."""
        spec = self.specs[c]
        return self.counts[c][domain] + spec.self_match - spec.max_skew - self.effective_minimum(c)

    def admits(self, c: int, domain: int) -> bool:
        """Whether hard constraint ``c`` alone would accept a copy in ``domain`` now."""
        return self._excess(c, domain) <= 0

    def _own(self, node: _Node) -> int:
        """The node's part of the score: its domain's count, or a cell's missing-key penalty."""
        if node.heap is None:
            return self.cell_penalty[node.cell]
        return self.counts[node.constraint][node.domain] if node.domain >= 0 else 0

    def _block_score(self, index: int) -> int | None:
        """The coarse part of a block's score, or None when a coarse hard constraint rejects it."""
        slot = self.block_slots[index]
        score = 0
        for position, c in enumerate(self.coarse):
            domain = slot[position]
            if self._hard[c] and self._excess(c, domain) > 0:
                return None
            if domain >= 0:
                score += self.counts[c][domain]
        return score

    def _peek(self, node: _Node) -> tuple[int, str] | None:
        """The subtree's best feasible (score, name), cleaning stale, parked and empty entries on the way."""
        heap = node.heap
        assert heap is not None
        while heap:
            stored, name, token, child = heap[0]
            if token != child.token:
                heapq.heappop(heap)
                continue
            if child.heap is None:
                return stored, name  # a cell's own score (its penalty) never changes
            c = child.constraint
            if self._hard[c]:
                excess = self._excess(c, child.domain)
                if excess > 0:
                    heapq.heappop(heap)
                    child.token += 1
                    child.parked = True
                    threshold = self.effective_minimum(c) + excess
                    heapq.heappush(self._parked[c], (threshold, next(self._sequence), child))
                    continue
            best = self._peek(child)
            if best is None:
                heapq.heappop(heap)  # every cell below is parked; a release re-attaches it
                child.token += 1
                continue
            actual = self._own(child) + best[0]
            if actual != stored or best[1] != name:
                heapq.heapreplace(heap, (actual, best[1], token, child))
                continue
            return stored, name
        return None

    def _reattach(self, node: _Node) -> None:
        """Push fresh entries for a released subtree and its ancestors (their keys may have dropped)."""
        while node.parent is not None and not node.parked:
            best = self._peek(node)
            if best is None:
                return
            node.token += 1
            assert node.parent.heap is not None
            heapq.heappush(node.parent.heap, (self._own(node) + best[0], best[1], node.token, node))
            node = node.parent

    # -- placing --------------------------------------------------------------------------------
    def choose(self) -> int | None:
        """The cell the next copy goes to (lowest score, then name), or None when none is feasible."""
        best: tuple[int, str] | None = None
        chosen: _Node | None = None
        for index, block in enumerate(self.blocks):
            coarse = self._block_score(index)
            if coarse is None:
                continue
            top = self._peek(block)
            if top is None:
                continue
            if best is None or (coarse + top[0], top[1]) < best:
                best, chosen = (coarse + top[0], top[1]), block
        if chosen is None:
            return None
        while chosen.heap is not None:  # the heap tops below were all validated by _peek
            chosen = chosen.heap[0][3]
        return chosen.cell

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
            parked = self._parked[c]
            threshold = self.effective_minimum(c)
            while parked and parked[0][0] <= threshold:
                node = heapq.heappop(parked)[2]
                node.parked = False
                self._reattach(node)

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
