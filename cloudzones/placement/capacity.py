"""How many more candidates hard per-value limits still allow: the look-ahead of ``choose_distributed``.

With one limited field the answer is a sum; with two it is a bipartite b-matching (each candidate
links its value of the first field to its value of the second), solved as a small max flow. With
three or more the exact question is NP-hard (3-dimensional matching), so the smallest two-field
bound is used instead: an upper bound, which can let the greedy walk into a dead end.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Mapping, Sequence


def max_selectable(rows: Sequence[tuple[str, ...]], capacities: Sequence[Mapping[str, int]], cap: int) -> int:
    """The most of ``rows`` choosable when value ``v`` of field ``i`` may be used ``capacities[i][v]`` more times.

    ``rows`` holds each remaining candidate's values of the limited fields, in field order. The
    answer never exceeds ``cap`` (the search stops there).
    """
    if cap <= 0:
        return 0
    usable = [row for row in rows if all(capacities[i].get(v, 0) > 0 for i, v in enumerate(row))]
    if not capacities:
        return min(len(usable), cap)
    if len(capacities) == 1:
        per_value = Counter(row[0] for row in usable)
        return min(cap, sum(min(n, capacities[0][v]) for v, n in per_value.items()))
    if len(capacities) == 2:
        return _two_field_flow(usable, capacities[0], capacities[1], cap)
    return min(_two_field_flow([(r[i], r[j]) for r in usable], capacities[i], capacities[j], cap)
               for i, j in itertools.combinations(range(len(capacities)), 2))


def _two_field_flow(rows: Sequence[tuple[str, ...]], left: Mapping[str, int], right: Mapping[str, int],
                    cap: int) -> int:
    # Nodes: 0 source, 1 sink, then one per left value and one per right value.
    pairs = Counter((row[0], row[1]) for row in rows)
    left_ids = {v: 2 + i for i, v in enumerate(sorted({a for a, _ in pairs}))}
    right_ids = {v: 2 + len(left_ids) + i for i, v in enumerate(sorted({b for _, b in pairs}))}
    residual: dict[int, dict[int, int]] = {n: {} for n in range(2 + len(left_ids) + len(right_ids))}

    def add(a: int, b: int, capacity: int) -> None:
        residual[a][b] = residual[a].get(b, 0) + capacity
        residual[b].setdefault(a, 0)

    for value, node in left_ids.items():
        add(0, node, left[value])
    for value, node in right_ids.items():
        add(node, 1, right[value])
    for (a, b), n in pairs.items():
        add(left_ids[a], right_ids[b], n)
    flow = 0
    while flow < cap:
        # Edmonds-Karp: the graph has one node per distinct value, so this stays small.
        parent = {0: 0}
        queue = deque([0])
        while queue and 1 not in parent:
            node = queue.popleft()
            for nxt, capacity in residual[node].items():
                if capacity > 0 and nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
        if 1 not in parent:
            break
        path = [1]
        while path[-1] != 0:
            path.append(parent[path[-1]])
        edges = list(zip(path[1:], path[:-1], strict=True))  # (from, to) along the augmenting path
        push = min(cap - flow, *(residual[u][w] for u, w in edges))
        for u, w in edges:
            residual[u][w] -= push
            residual[w][u] += push
        flow += push
    return flow
