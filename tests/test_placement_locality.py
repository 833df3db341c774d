"""Tests for replica_to_remove (Longhorn data-locality cleanup, deterministic)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones import errors
from cloudzones.placement import Replica, replica_to_remove

E = "E"


def r(spec: str) -> Replica:
    """``name@node/disk:zone`` → Replica (disk and zone optional)."""
    name, rest = spec.split("@")
    rest, _, zone = rest.partition(":")
    node, _, disk = rest.partition("/")
    return Replica(name, node, disk, zone)


class TestReplicaToRemove:
    """The Longhorn examples (engine on node E in zone Z1) and the deterministic tie-breaks."""

    @pytest.mark.parametrize(("replicas", "removed"), [
        (["a@E/d1:Z1", "b@N1/d1:Z2", "c@N1/d1:Z2"], "b"),  # disk group {b, c}
        (["a@E/d1:Z1", "b@N1/d1:Z2", "c@N1/d2:Z2"], "b"),  # node group {b, c}
        (["a@E/d1:Z1", "b@N1/d1:Z1", "c@N2/d1:Z2"], "b"),  # zone group {a, b}; a is the only local one
        (["a@E/d1:Z1", "b@N1/d1:Z2", "c@N2/d1:Z3"], "b"),  # no group: all, a skipped as local
    ])
    def test_longhorn_examples(self, replicas: list[str], removed: str) -> None:
        """Disk, then node, then zone, then all; first by name that is not the last local replica."""
        assert replica_to_remove([r(s) for s in replicas], E).name == removed

    def test_crowded_local_disk_gives_up_one_local_replica(self) -> None:
        """Two replicas on the engine's disk: one goes and one stays (Longhorn would delete nothing)."""
        assert replica_to_remove([r("a@E/d1:Z1"), r("b@E/d1:Z1"), r("c@N1/d1:Z2")], E).name == "a"

    def test_equal_groups_broken_by_key(self) -> None:
        """Two node groups of two: the group of the smaller node name loses a replica, whatever the input order."""
        replicas = [r("d@N2/d1:Z2"), r("c@N2/d2:Z2"), r("b@N1/d2:Z1"), r("a@N1/d1:Z1"), r("e@E/d1:Z3")]
        assert replica_to_remove(replicas, E).name == "a"
        assert replica_to_remove(list(reversed(replicas)), E).name == "a"

    def test_unknown_disk_and_zone_group_with_nothing(self) -> None:
        """Replicas with disk '' never share a disk, and zone '' never forms a zone group."""
        replicas = [r("a@E:Z1"), r("b@N1"), r("c@N2"), r("d@N3:Z1")]
        # disks unknown, nodes distinct, zones: Z1 {a, d} (b and c have no zone) → d (a is local).
        assert replica_to_remove(replicas, E).name == "d"
        assert replica_to_remove([r("a@N1"), r("b@N2")], E).name == "a"

    def test_engine_without_local_replica(self) -> None:
        """With no replica on the engine's node, any replica may go."""
        assert replica_to_remove([r("a@N1/d1"), r("b@N2/d1")], "elsewhere").name == "a"

    @pytest.mark.parametrize("replicas", [[], [Replica("a", "E")]])
    def test_fewer_than_two_is_value_error(self, replicas: list[Replica]) -> None:
        """Removing from fewer than two replicas is refused with a ValueError."""
        with pytest.raises(ValueError, match="at least two"):
            replica_to_remove(replicas, E)

    def test_non_replica_refused(self) -> None:
        """Anything but Replica objects is refused."""
        with pytest.raises(errors.InvalidPlacementSpec, match="Replica"):
            replica_to_remove([Replica("a", "E"), ("b", "N1")], E)  # type: ignore[list-item]


replicas_strategy = st.lists(
    st.builds(Replica, name=st.sampled_from("abcdefgh"), node=st.sampled_from(["E", "N1", "N2", ""]),
              disk=st.sampled_from(["", "d1", "d2"]), zone=st.sampled_from(["", "Z1", "Z2"])),
    min_size=2, max_size=7, unique_by=lambda rep: rep.name)


class TestReplicaToRemoveProperties:
    """Hypothesis: never the last local replica; independent of order; always one of the inputs."""

    @settings(max_examples=200, deadline=None)
    @given(replicas=replicas_strategy, seed=st.integers(0, 2**32 - 1))
    def test_keeps_a_local_replica_and_is_order_independent(self, replicas: list[Replica], seed: int) -> None:
        """The last replica on the engine node survives, and shuffling the input changes nothing."""
        removed = replica_to_remove(replicas, E)
        assert removed in replicas
        local = [rep for rep in replicas if rep.node == E]
        assert local != [removed]
        shuffled = replicas[:]
        random.Random(seed).shuffle(shuffled)
        assert replica_to_remove(shuffled, E) == removed

    @settings(max_examples=200, deadline=None)
    @given(replicas=replicas_strategy)
    def test_removes_from_the_most_crowded_disk(self, replicas: list[Replica]) -> None:
        """When some known disk holds two or more replicas, the removed one is on a disk of the largest size."""
        disks: dict[tuple[str, str], int] = {}
        for rep in replicas:
            if rep.disk and rep.node:
                disks[(rep.node, rep.disk)] = disks.get((rep.node, rep.disk), 0) + 1
        if disks and max(disks.values()) > 1:
            removed = replica_to_remove(replicas, E)
            assert disks.get((removed.node, removed.disk)) == max(disks.values())
