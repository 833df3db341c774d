"""Tests for volume zone choice: Kubernetes' FNV-1 round-robin, bit for bit, and the balanced mode."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones import errors
from cloudzones.placement import volumes

ABC = ["a", "b", "c"]
NINE = list("abcdefghi")
EASTUS = ["eastus-1", "eastus-2", "eastus-3"]
UINT32_MAX = 2**32 - 1

# kubernetes/kubernetes staging/src/k8s.io/cloud-provider/volume/helpers/zones_test.go,
# TestChooseZonesForVolume, transcribed as data: (zones, claim name, count, expected zones).
KUBERNETES_TABLE = [
    (ABC, "henley", 1, {"a"}), (ABC, "henley", 2, {"a", "b"}),
    (ABC, "henley-0", 1, {"a"}), (ABC, "henley-0", 2, {"a", "b"}),
    (ABC, "henley-1", 1, {"b"}), (ABC, "henley-1", 2, {"c", "a"}),
    (ABC, "henley-2", 1, {"c"}), (ABC, "henley-2", 2, {"b", "c"}),
    (ABC, "henley-3", 1, {"a"}), (ABC, "henley-3", 2, {"a", "b"}),
    (ABC, "henley-4", 1, {"b"}), (ABC, "henley-4", 2, {"c", "a"}),
    (ABC, "henley-", 1, {"c"}), (ABC, "henley-", 2, {"c", "a"}),
    (ABC, "henley-a", 1, {"c"}), (ABC, "henley-a", 2, {"c", "a"}),
    (ABC, "medium--1", 1, {"c"}), (ABC, "medium--1", 2, {"a", "b"}),
    (ABC, "medium-henley-1", 1, {"b"}), (ABC, "medium-henley-1", 2, {"c", "a"}),
    (ABC, "loud-henley-1", 1, {"b"}), (ABC, "loud-henley-1", 2, {"c", "a"}),
    (ABC, "quiet-henley-2", 1, {"c"}), (ABC, "quiet-henley-2", 2, {"b", "c"}),
    (ABC, "medium-henley-2", 1, {"c"}), (ABC, "medium-henley-2", 2, {"b", "c"}),
    (ABC, "medium-henley-3", 1, {"a"}), (ABC, "medium-henley-3", 2, {"a", "b"}),
    (ABC, "medium-henley-4", 1, {"b"}), (ABC, "medium-henley-4", 2, {"c", "a"}),
    (ABC, "medium-alpha-henley-2", 1, {"c"}), (ABC, "medium-alpha-henley-2", 2, {"b", "c"}),
    (ABC, "medium-beta-henley-3", 1, {"a"}), (ABC, "medium-beta-henley-3", 2, {"a", "b"}),
    (ABC, "medium-gamma-henley-4", 1, {"b"}), (ABC, "medium-gamma-henley-4", 2, {"c", "a"}),
    (ABC, "medium-henley--2", 1, {"a"}), (ABC, "medium-henley--2", 2, {"c", "a"}),
    (ABC, "medium-henley--3", 1, {"b"}), (ABC, "medium-henley--3", 2, {"b", "c"}),
    (ABC, "medium-henley--4", 1, {"c"}), (ABC, "medium-henley--4", 2, {"a", "b"}),
    (ABC, "medium-henley--4", 3, {"c", "a", "b"}), (ABC, "medium-henley--4", 4, {"c", "a", "b"}),
    (NINE, "henley-0", 2, {"a", "b"}), (NINE, "henley-1", 2, {"c", "d"}),
    (NINE, "henley-2", 2, {"e", "f"}), (NINE, "henley-3", 2, {"g", "h"}),
    (NINE, "henley-0", 3, {"a", "b", "c"}), (NINE, "henley-1", 3, {"d", "e", "f"}),
    (NINE, "henley-2", 3, {"g", "h", "i"}), (NINE, "henley-3", 3, {"a", "b", "c"}),
    ([], "henley-1", 1, set()), ([], "henley-2", 1, set()),
]

statefulset_names = st.from_regex(r"[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,5}){0,3}", fullmatch=True)
templates = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
dashed_templates = st.from_regex(r"[a-z][a-z0-9]{0,4}(-[a-z0-9]{1,4}){0,2}", fullmatch=True)
zone_sets = st.lists(st.from_regex(r"eastus-[1-9]", fullmatch=True), min_size=2, max_size=6, unique=True)


class TestFnv1:
    """fnv1_32 is Go's hash/fnv New32 (FNV-1, not FNV-1a)."""

    @pytest.mark.parametrize(("text", "expected"), [
        ("henley", 1180403676), ("henley-", 2652299129), ("henley-a", 1459735322), ("", 2166136261),
        ("app", 899422574), ("a", 0x050C5D7E), ("foobar", 0x31F0B262),
    ])
    def test_vectors(self, text: str, expected: int) -> None:
        """Known vectors from Kubernetes' tests and the FNV reference."""
        assert volumes.fnv1_32(text) == expected


class TestParseClaimName:
    """parse_claim_name splits off the StatefulSet ordinal as strconv.ParseUint(s, 10, 32) would."""

    @pytest.mark.parametrize(("name", "ordinal", "kube_key", "balanced_key"), [
        ("henley", None, "henley", "henley"),
        ("henley-7", 7, "henley", "henley"),
        ("henley-007", 7, "henley", "henley"),
        ("data-svc1-db-0", 0, "db", "svc1-db"),
        ("data-my-app-2", 2, "app", "my-app"),
        ("medium-henley--2", 2, "", "henley-"),
        (f"henley-{UINT32_MAX}", UINT32_MAX, "henley", "henley"),
        (f"henley-{UINT32_MAX + 1}", None, f"henley-{UINT32_MAX + 1}", f"henley-{UINT32_MAX + 1}"),
        ("henley-+1", None, "henley-+1", "henley-+1"),
        ("henley-١", None, "henley-١", "henley-١"),
        ("henley-1_0", None, "henley-1_0", "henley-1_0"),
        ("henley-", None, "henley-", "henley-"),
    ])
    def test_split(self, name: str, ordinal: int | None, kube_key: str, balanced_key: str) -> None:
        """Ordinals are ASCII digits up to 2^32-1; Kubernetes keeps the last token, balanced the StatefulSet."""
        claim = volumes.parse_claim_name(name)
        assert (claim.ordinal, claim.kubernetes_key, claim.balanced_key) == (ordinal, kube_key, balanced_key)

    def test_statefulset_given(self) -> None:
        """A known StatefulSet name fixes the split even when the template has dashes."""
        claim = volumes.parse_claim_name("www-data-svc-db-3", statefulset="svc-db")
        assert (claim.ordinal, claim.balanced_key, claim.kubernetes_key) == (3, "svc-db", "db")

    @pytest.mark.parametrize("name", ["data-web-0", "svc-db-0", "data-svc-db", "-svc-db-0x"])
    def test_statefulset_mismatch(self, name: str) -> None:
        """A claim not named <template>-<statefulset>-<ordinal> is refused, naming both."""
        with pytest.raises(errors.ConfigError, match="svc-db"):
            volumes.parse_claim_name(name, statefulset="svc-db")


class TestKubernetesZones:
    """kubernetes_zones reproduces ChooseZonesForVolume exactly."""

    @pytest.mark.parametrize(("zones", "name", "count", "expected"), KUBERNETES_TABLE)
    def test_upstream_table(self, zones: list[str], name: str, count: int, expected: set[str]) -> None:
        """Every row of Kubernetes' own TestChooseZonesForVolume."""
        assert volumes.kubernetes_zones(zones, name, count) == expected

    def test_dash_problem(self) -> None:
        """StatefulSets ending in the same token share their zone sequence (reference §1.6)."""
        mine = [volumes.kubernetes_zone(EASTUS, f"data-my-app-{i}") for i in range(3)]
        yours = [volumes.kubernetes_zone(EASTUS, f"data-your-app-{i}") for i in range(3)]
        assert mine == yours == ["eastus-3", "eastus-1", "eastus-2"]

    def test_zone_order_does_not_matter(self) -> None:
        """Zones are sorted first, so input order and duplicates change nothing."""
        assert volumes.kubernetes_zones(["c", "a", "b", "a"], "henley-1") == {"b"}

    def test_uint32_wrap_puts_consecutive_ordinals_together(self) -> None:
        """hash + ordinal wraps at 2^32 before the modulo, as in Go: two ordinals share a zone there."""
        ordinal = UINT32_MAX - 1180403676  # hash("henley") + ordinal == 2^32 - 1
        first = volumes.kubernetes_zone(ABC, f"data-henley-{ordinal}")
        second = volumes.kubernetes_zone(ABC, f"data-henley-{ordinal + 1}")
        assert (first, second) == ("a", "a")

    def test_loop_bound_overflow_gives_nothing(self) -> None:
        """Go's `i < start+count` overflows for the largest ordinal: no zone at all."""
        assert volumes.kubernetes_zones(ABC, f"henley-{UINT32_MAX}") == set()
        with pytest.raises(errors.NoZonedNodes, match="henley"):
            volumes.kubernetes_zone(ABC, f"henley-{UINT32_MAX}")

    def test_no_zones(self) -> None:
        """No zones: an empty set, and kubernetes_zone raises instead of Go's panic."""
        assert volumes.kubernetes_zones([], "x", 3) == set()
        with pytest.raises(errors.NoZonedNodes):
            volumes.kubernetes_zone([], "x")

    def test_hash_and_index(self) -> None:
        """kubernetes_hash is getPVCNameHashAndIndexOffset."""
        assert volumes.kubernetes_hash("medium-alpha-henley-2") == (1180403676, 2)
        assert volumes.kubernetes_hash("henley") == (1180403676, 0)


class TestBalancedZones:
    """balanced_zones spreads StatefulSets sharing a last token and keeps Kubernetes' guarantees."""

    def test_99_statefulsets_sharing_a_token(self) -> None:
        """svc<i>-db: Kubernetes puts all 99 first volumes in one zone, balanced no more than 45 per zone."""
        names = [f"data-svc{i}-db-0" for i in range(1, 100)]
        kube = collections.Counter(volumes.kubernetes_zone(EASTUS, name) for name in names)
        balanced = collections.Counter(volumes.balanced_zones(EASTUS, name)[0] for name in names)
        assert list(kube.values()) == [99]
        assert set(balanced) == set(EASTUS)
        assert max(balanced.values()) <= 45

    @settings(max_examples=60, deadline=None)
    @given(statefulset_names, templates, st.integers(min_value=0, max_value=UINT32_MAX - 1), zone_sets)
    def test_consecutive_ordinals_differ(self, sts: str, template: str, ordinal: int, zones: list[str]) -> None:
        """Ordinals n and n+1 are always in different zones, even where Kubernetes' uint32 sum wraps."""
        first = volumes.balanced_zones(zones, f"{template}-{sts}-{ordinal}")
        second = volumes.balanced_zones(zones, f"{template}-{sts}-{ordinal + 1}")
        assert first != second

    def test_consecutive_ordinals_differ_at_kubernetes_wrap(self) -> None:
        """The ordinals where Kubernetes repeats a zone are still spread in balanced mode."""
        ordinal = UINT32_MAX - 1180403676
        assert volumes.balanced_zones(ABC, f"data-henley-{ordinal}") != \
            volumes.balanced_zones(ABC, f"data-henley-{ordinal + 1}")

    @settings(max_examples=60, deadline=None)
    @given(statefulset_names, st.lists(templates, min_size=2, max_size=4, unique=True),
           st.integers(min_value=0, max_value=500), zone_sets)
    def test_claims_of_one_member_share_a_zone(self, sts: str, claim_templates: list[str], ordinal: int,
                                               zones: list[str]) -> None:
        """Every claim template of one pod lands in the same zone (templates without dashes)."""
        chosen = {tuple(volumes.balanced_zones(zones, f"{t}-{sts}-{ordinal}")) for t in claim_templates}
        assert len(chosen) == 1

    @settings(max_examples=60, deadline=None)
    @given(statefulset_names, st.lists(dashed_templates, min_size=2, max_size=4, unique=True),
           st.integers(min_value=0, max_value=500), zone_sets)
    def test_claims_share_a_zone_when_statefulset_known(self, sts: str, claim_templates: list[str],
                                                        ordinal: int, zones: list[str]) -> None:
        """With statefulset= the claims of one pod share a zone even with dashed templates."""
        chosen = {tuple(volumes.balanced_zones(zones, f"{t}-{sts}-{ordinal}", statefulset=sts))
                  for t in claim_templates}
        assert len(chosen) == 1

    def test_statefulset_hint_matches_inference(self) -> None:
        """For an undashed template, naming the StatefulSet changes nothing."""
        for i in range(20):
            assert volumes.balanced_zones(EASTUS, f"data-svc{i}-db-1") == \
                volumes.balanced_zones(EASTUS, f"data-svc{i}-db-1", statefulset=f"svc{i}-db")

    @settings(max_examples=40, deadline=None)
    @given(statefulset_names, st.integers(min_value=0, max_value=10**6), zone_sets,
           st.integers(min_value=1, max_value=8))
    def test_multi_zone(self, sts: str, ordinal: int, zones: list[str], count: int) -> None:
        """count distinct zones (at most all of them), the same whatever the input order."""
        chosen = volumes.balanced_zones(zones, f"data-{sts}-{ordinal}", count)
        assert len(chosen) == len(set(chosen)) == min(count, len(zones))
        assert set(chosen) <= set(zones)
        shuffled = list(reversed(zones))
        assert volumes.balanced_zones(shuffled, f"data-{sts}-{ordinal}", count) == chosen

    def test_replicated_consecutive_members_start_apart(self) -> None:
        """Two-zone volumes of consecutive members start count positions apart, like Kubernetes."""
        first = volumes.balanced_zones(NINE, "data-web-0", 2)
        second = volumes.balanced_zones(NINE, "data-web-1", 2)
        assert NINE.index(second[0]) == (NINE.index(first[0]) + 2) % 9

    def test_no_zones(self) -> None:
        """No zones or a zero count give no zone."""
        assert volumes.balanced_zones([], "data-web-0") == []
        assert volumes.balanced_zones(EASTUS, "data-web-0", 0) == []

    def test_single_zone(self) -> None:
        """With one zone every claim goes there."""
        assert {volumes.balanced_zones(["eastus-1"], f"data-web-{i}")[0] for i in range(5)} == {"eastus-1"}
