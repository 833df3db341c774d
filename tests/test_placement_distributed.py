"""Tests for choose_distributed: hard limits, balance at every prefix, priority, id (FoundationDB coordinators)."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones import errors
from cloudzones.placement import Candidate, choose_distributed

THREE_DATA_HALL = {"zoneid": 1, "data_hall": 3}  # FDB GetHardLimits for three_data_hall, usable_regions <= 1


def _ids(chosen: Sequence[Candidate]) -> list[str]:
    return [c.id for c in chosen]


def _hall_processes(per_hall: int, *, halls: str = "ABC", zones_per_hall: int | None = None) -> list[Candidate]:
    """Storage processes ``<hall>-storage-<i>``, each in its own zone unless zones_per_hall is given."""
    return [Candidate(f"{h}-storage-{i}", {"zoneid": f"{h}-z{i if zones_per_hall is None else i % zones_per_hall}",
                                           "data_hall": h})
            for h in halls for i in range(per_hall)]


class TestFoundationDBScenarios:
    """The anchors' coordinator selection, balanced at every prefix."""

    def test_nine_coordinators_over_three_halls(self) -> None:
        """zoneid <= 1, data_hall <= 3: 3 per hall, and halls rotate (FDB would pick A,A,A,B,B,B,C,C,C)."""
        chosen = choose_distributed(_hall_processes(4), 9, fields=("zoneid", "data_hall"), hard_limits=THREE_DATA_HALL)
        assert _ids(chosen) == ["A-storage-0", "B-storage-0", "C-storage-0", "A-storage-1", "B-storage-1",
                                "C-storage-1", "A-storage-2", "B-storage-2", "C-storage-2"]
        assert [c.locality["data_hall"] for c in chosen[:3]] == ["A", "B", "C"]

    def test_three_data_hall_logs_preferred_three_per_hall(self) -> None:
        """3 halls × (8 storage + 4 log), logs priority 1: nine log coordinators, 3 per hall."""
        processes = [Candidate(f"{h}-{cls}-{i}", {"zoneid": f"{h}-{cls}-{i}", "data_hall": h}, int(cls == "log"))
                     for h in "ABC" for cls, n in (("storage", 8), ("log", 4)) for i in range(n)]
        chosen = choose_distributed(processes, 9, fields=("zoneid", "data_hall"), hard_limits=THREE_DATA_HALL)
        assert Counter(c.locality["data_hall"] for c in chosen) == {"A": 3, "B": 3, "C": 3}
        assert all("-log-" in c.id for c in chosen)
        assert _ids(chosen)[:3] == ["A-log-0", "B-log-0", "C-log-0"]

    def test_zone_is_the_az_issue_2185(self) -> None:
        """9 processes whose zoneid is one of 3 AZs, 5 wanted, zoneid <= 1: 3 chosen, error says zoneid ran out."""
        processes = [Candidate(f"p{i}", {"zoneid": f"az{i % 3 + 1}"}) for i in range(9)]
        with pytest.raises(errors.NotEnoughCandidates) as info:
            choose_distributed(processes, 5, hard_limits={"zoneid": 1})
        assert _ids(info.value.chosen) == ["p0", "p1", "p2"]
        assert info.value.required == 5
        message = str(info.value)
        assert "could only choose 3" in message and "5 are required" in message
        assert "'zoneid'" in message and "'az1', 'az2', 'az3'" in message

    def test_two_zones_per_hall_is_not_enough(self) -> None:
        """With 2 zones per hall (the design doc's minimum) only 6 of 9 coordinators fit: 2 per hall."""
        processes = _hall_processes(4, zones_per_hall=2)
        with pytest.raises(errors.NotEnoughCandidates, match="'zoneid' is limited to 1") as info:
            choose_distributed(processes, 9, fields=("zoneid", "data_hall"), hard_limits=THREE_DATA_HALL)
        assert Counter(c.locality["data_hall"] for c in info.value.chosen) == {"A": 2, "B": 2, "C": 2}

    def test_multi_region_dcid_limit(self) -> None:
        """usable_regions > 1: dcid <= ceil(9 / 3 DCs) = 3, zones unique, DCs rotate."""
        processes = [Candidate(f"{dc}-{i}", {"zoneid": f"{dc}-z{i}", "dcid": dc}) for dc in ("dc1", "dc2", "dc3")
                     for i in range(5)]
        limits = {"zoneid": 1, "dcid": math.ceil(9 / 3)}
        chosen = choose_distributed(processes, 9, fields=("zoneid", "dcid"), hard_limits=limits)
        assert [c.locality["dcid"] for c in chosen] == ["dc1", "dc2", "dc3"] * 3

    def test_all_storage_distinct_zones(self) -> None:
        """A flat cluster of storage processes, zoneid <= 1: five coordinators in five distinct zones."""
        processes = [Candidate(f"storage-{i}", {"zoneid": f"z{i % 7}"}) for i in range(14)]
        chosen = choose_distributed(processes, 5, hard_limits={"zoneid": 1})
        assert len({c.locality["zoneid"] for c in chosen}) == 5


class TestChooseDistributed:
    """Order of concerns and argument handling."""

    def test_look_ahead_keeps_the_selection_completable(self) -> None:
        """Picking a (first by id) would strand the second pick; b then c satisfies both limits."""
        pool = [Candidate("a", {"zoneid": "z1", "hall": "A"}), Candidate("b", {"zoneid": "z2", "hall": "A"}),
                Candidate("c", {"zoneid": "z1", "hall": "B"})]
        assert _ids(choose_distributed(pool, 2, fields=("zoneid", "hall"), hard_limits={"zoneid": 1, "hall": 1})) == [
            "b", "c"]

    def test_joint_limits_give_the_largest_partial(self) -> None:
        """When the limits allow 2 of 3, .chosen has 2 valid candidates."""
        pool = [Candidate("a", {"zoneid": "z1", "hall": "A"}), Candidate("b", {"zoneid": "z1", "hall": "B"}),
                Candidate("c", {"zoneid": "z2", "hall": "A"})]
        with pytest.raises(errors.NotEnoughCandidates) as info:
            choose_distributed(pool, 3, fields=("zoneid", "hall"), hard_limits={"zoneid": 1, "hall": 1})
        assert _ids(info.value.chosen) == ["b", "c"]

    def test_joint_limit_message(self) -> None:
        """When no single field explains the shortfall, the message names the fields together."""
        # 3 x values and 3 y values, but every candidate has x1 or y1: at most 2 fit (König).
        pool = [Candidate(i, {"x": x, "y": y}) for i, x, y in
                (("a", "1", "1"), ("b", "2", "1"), ("c", "3", "1"), ("d", "1", "2"), ("e", "1", "3"))]
        with pytest.raises(errors.NotEnoughCandidates, match="'x' and 'y' together") as info:
            choose_distributed(pool, 3, fields=("x", "y"), hard_limits={"x": 1, "y": 1})
        assert len(info.value.chosen) == 2

    def test_balance_beats_priority(self) -> None:
        """High-priority candidates all in hall A cannot take both of two picks."""
        pool = [Candidate("a1", {"hall": "A"}, 5), Candidate("a2", {"hall": "A"}, 5), Candidate("b1", {"hall": "B"})]
        assert _ids(choose_distributed(pool, 2, fields=("hall",))) == ["a1", "b1"]

    def test_priority_beats_id_and_ids_compare_bytewise(self) -> None:
        """Higher priority first; among equals the id, compared as strings (p10 < p2)."""
        pool = [Candidate("p2", {"zoneid": "a"}), Candidate("p10", {"zoneid": "b"}),
                Candidate("p9", {"zoneid": "c"}, 1)]
        assert _ids(choose_distributed(pool, 3)) == ["p9", "p10", "p2"]

    def test_unlimited_field_repeats_only_when_it_must(self) -> None:
        """Without hard limits, values repeat only once every value has been used."""
        pool = [Candidate(f"{z}{i}", {"zoneid": z}) for z in ("x", "y") for i in range(3)]
        assert [c.locality["zoneid"] for c in choose_distributed(pool, 5)] == ["x", "y", "x", "y", "x"]

    def test_missing_field_counts_as_empty_value(self) -> None:
        """Candidates without the field share the value '' and are spread like any other value."""
        pool = [Candidate("a", {}), Candidate("b", {}), Candidate("c", {"zoneid": "z"})]
        assert _ids(choose_distributed(pool, 2)) == ["a", "c"]
        with pytest.raises(errors.NotEnoughCandidates):
            choose_distributed(pool, 3, hard_limits={"zoneid": 1})

    def test_limit_on_a_field_not_balanced(self) -> None:
        """A hard limit applies even to a field not listed in fields."""
        pool = [Candidate("a", {"zoneid": "1", "rack": "r"}), Candidate("b", {"zoneid": "2", "rack": "r"}),
                Candidate("c", {"zoneid": "1", "rack": "s"})]
        assert _ids(choose_distributed(pool, 2, hard_limits={"rack": 1})) == ["a", "c"]

    def test_too_few_candidates(self) -> None:
        """More wanted than given: every candidate is returned in .chosen and the message says how many exist."""
        pool = [Candidate("a", {"zoneid": "1"})]
        with pytest.raises(errors.NotEnoughCandidates, match="only 1 candidate") as info:
            choose_distributed(pool, 2)
        assert info.value.chosen == pool

    @pytest.mark.parametrize(("kwargs", "fragment"), [
        ({"count": -1}, "-1"), ({"count": 1, "hard_limits": {"zoneid": 0}}, "zoneid"),
        ({"count": 1, "fields": "zoneid"}, "zoneid"), ({"count": 1, "fields": ("",)}, "non-empty"),
    ])
    def test_bad_arguments(self, kwargs: dict[str, object], fragment: str) -> None:
        """A negative count, a limit below 1 or a bare string for fields raise InvalidPlacementSpec."""
        with pytest.raises(errors.InvalidPlacementSpec, match=fragment):
            choose_distributed([Candidate("a", {"zoneid": "1"})], **kwargs)  # type: ignore[arg-type]

    def test_duplicate_ids_refused(self) -> None:
        """Two candidates with one id would make the order ambiguous: refused."""
        with pytest.raises(errors.InvalidPlacementSpec, match="'a'"):
            choose_distributed([Candidate("a", {}), Candidate("a", {"zoneid": "2"})], 1)

    def test_zero_count_and_hashable(self) -> None:
        """count 0 gives []; a Candidate with a dict locality is still hashable (by id and priority)."""
        assert choose_distributed([Candidate("a", {"zoneid": "1"})], 0) == []
        assert len({Candidate("a", {"zoneid": "1"}), Candidate("a", {"zoneid": "1"})}) == 1


# -- properties -------------------------------------------------------------------------------------------
@st.composite
def pools(draw: st.DrawFn, max_size: int = 8) -> list[Candidate]:
    n = draw(st.integers(0, max_size))
    return [Candidate(f"c{i}", {f: draw(st.sampled_from(values)) for f, values in
                                (("zone", ["z1", "z2", "z3", "z4"]), ("hall", ["A", "B", "C"]), ("dc", ["d1", "d2"]))
                                if draw(st.integers(0, 6))},
                      draw(st.integers(0, 2)))
            for i in range(n)]


LIMITS = st.dictionaries(st.sampled_from(["zone", "hall"]), st.integers(1, 3), max_size=2)


def _valid(chosen: Sequence[Candidate], limits: Mapping[str, int]) -> bool:
    return all(n <= limits[f] for f in limits for n in Counter(c.locality.get(f, "") for c in chosen).values())


def _outcome(pool: Sequence[Candidate], count: int, fields: Sequence[str], limits: Mapping[str, int]) -> list[str]:
    try:
        return _ids(choose_distributed(pool, count, fields=fields, hard_limits=limits))
    except errors.NotEnoughCandidates as error:
        assert error.required == count
        return _ids(error.chosen)


class TestChooseDistributedProperties:
    """Hypothesis: limits, largest size, balance at every prefix, permutation invariance."""

    @settings(max_examples=150, deadline=None)
    @given(pool=pools(), count=st.integers(0, 9), limits=LIMITS,
           fields=st.sampled_from([("zone",), ("zone", "hall"), ("hall", "zone", "dc")]))
    def test_limits_respected_and_size_is_the_largest_possible(self, pool: list[Candidate], count: int,
                                                               limits: dict[str, int], fields: tuple[str, ...]) -> None:
        """No prefix breaks a hard limit, and the result is as large as any valid subset (brute force)."""
        ids = _outcome(pool, count, fields, limits)
        chosen = [c for i in ids for c in pool if c.id == i]
        assert len(set(ids)) == len(ids)
        assert _valid(chosen, limits)
        best = next(k for k in range(min(count, len(pool)), -1, -1)
                    if any(_valid(subset, limits) for subset in itertools.combinations(pool, k)))
        assert len(chosen) == best

    @settings(max_examples=150, deadline=None)
    @given(pool=pools(), count=st.integers(0, 9), limit=st.none() | st.integers(1, 3),
           second=st.sampled_from([(), ("hall",), ("hall", "dc")]))
    def test_first_field_balanced_at_every_prefix(self, pool: list[Candidate], count: int, limit: int | None,
                                                  second: tuple[str, ...]) -> None:
        """Each pick uses a first-field value no more used than any value that still had candidates left."""
        limits = {} if limit is None else {"zone": limit}
        ids = _outcome(pool, count, ("zone", *second), limits)
        used: Counter[str] = Counter()
        left = Counter(c.locality.get("zone", "") for c in pool)
        by_id = {c.id: c for c in pool}
        for i in ids:
            value = by_id[i].locality.get("zone", "")
            open_values = [v for v, n in left.items() if n and (limit is None or used[v] < limit)]
            assert used[value] <= min(used[v] for v in open_values)
            used[value] += 1
            left[value] -= 1

    @settings(max_examples=100, deadline=None)
    @given(pool=pools(max_size=12), count=st.integers(0, 12))
    def test_every_field_balanced_without_limits(self, pool: list[Candidate], count: int) -> None:
        """Without hard limits each pick has the least-used (zone, hall, dc) values, compared field by field."""
        fields = ("zone", "hall", "dc")
        ids = _outcome(pool, count, fields, {})
        assert len(ids) == min(count, len(pool))
        used: dict[str, Counter[str]] = {f: Counter() for f in fields}
        remaining = {c.id: c for c in pool}

        def usage(c: Candidate) -> tuple[int, ...]:
            return tuple(used[f][c.locality.get(f, "")] for f in fields)

        for i in ids:
            picked = remaining.pop(i)
            assert all(usage(picked) <= usage(other) for other in remaining.values())
            for f in fields:
                used[f][picked.locality.get(f, "")] += 1

    @settings(max_examples=80, deadline=None)
    @given(pool=pools(max_size=12), count=st.integers(0, 9), limits=LIMITS, seed=st.integers(0, 2**32 - 1))
    def test_deterministic_under_permutation(self, pool: list[Candidate], count: int, limits: dict[str, int],
                                             seed: int) -> None:
        """The same candidates in another order give the same list."""
        shuffled = pool[:]
        random.Random(seed).shuffle(shuffled)
        fields = ("zone", "hall")
        assert _outcome(shuffled, count, fields, limits) == _outcome(pool, count, fields, limits)
