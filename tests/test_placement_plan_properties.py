"""Property tests: plan_spread and its engine agree with a per-replica full-scan reference written here."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudzones import errors
from cloudzones.placement import feasible_nodes, plan_spread, planner

PENALTY = planner.MISSING_KEY_PENALTY


# -- the engine on its own numeric model ---------------------------------------------------------------
@dataclasses.dataclass
class Model:
    specs: list[planner.ConstraintSpec]
    counts: list[list[int]]
    names: list[str]
    slots: list[tuple[int, ...]]


@st.composite
def models(draw: st.DrawFn) -> Model:
    specs, counts = [], []
    for _ in range(draw(st.integers(1, 4))):
        hard = draw(st.booleans())
        self_match = draw(st.integers(0, 1))
        specs.append(planner.ConstraintSpec(
            hard=hard, max_skew=draw(st.integers(1, 3)), self_match=self_match,
            increment=self_match and draw(st.integers(0, 1)), min_domains=draw(st.integers(1, 4)) if hard else 1))
        counts.append(draw(st.lists(st.integers(0, 4), min_size=1, max_size=6)))
    names = draw(st.lists(st.sampled_from([f"n{i:02d}" for i in range(40)]), min_size=1, max_size=30, unique=True))
    slots = []
    for _ in names:
        missing_soft = draw(st.booleans()) and draw(st.booleans())
        slots.append(tuple(-1 if (missing_soft and not s.hard) else draw(st.integers(0, len(c) - 1))
                           for s, c in zip(specs, counts, strict=True)))
    return Model(specs, counts, names, slots)


def reference_engine(model: Model, count: int) -> list[str]:
    """Every replica: filter and score every candidate from scratch."""
    counts = [list(c) for c in model.counts]
    chosen: list[str] = []
    for _ in range(count):
        best: tuple[int, str, tuple[int, ...]] | None = None
        for name, slot in zip(model.names, model.slots, strict=True):
            feasible = True
            for c, spec in enumerate(model.specs):
                if spec.hard:
                    minimum = 0 if len(counts[c]) < spec.min_domains else min(counts[c])
                    feasible &= counts[c][slot[c]] + spec.self_match - minimum <= spec.max_skew
            if not feasible:
                continue
            score = (PENALTY if -1 in slot else 0) + sum(counts[c][d] for c, d in enumerate(slot) if d >= 0)
            if best is None or (score, name) < best[:2]:
                best = (score, name, slot)
        if best is None:
            break
        chosen.append(best[1])
        for c, spec in enumerate(model.specs):
            if spec.increment and best[2][c] >= 0:
                counts[c][best[2][c]] += 1
    return chosen


class TestPlannerEngine:
    """The lazy-heap engine gives the full-scan answer whatever the coarse/fine split."""

    @settings(max_examples=200, deadline=None)
    @given(model=models(), count=st.integers(0, 40))
    def test_matches_full_scan_for_every_split(self, model: Model, count: int) -> None:
        """All-fine (1 block), automatic and all-coarse splits all equal the reference plan."""
        expected = reference_engine(model, count)
        for max_blocks in (1, None, 10**6):
            engine = planner.Planner(model.specs, model.counts, model.names, model.slots, max_blocks=max_blocks)
            assert engine.run(count) == expected, max_blocks


# -- plan_spread on manifests ------------------------------------------------------------------------
KEYS = ("zone", "rack", "host")
KINDS = ("web", "db", "empty", "nil")


@dataclasses.dataclass
class Scenario:
    pod: dict[str, Any]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    constraints: list[dict[str, Any]]
    node_selector: dict[str, str]
    tolerates: bool


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = []
    for i in range(draw(st.integers(1, 30))):
        name = f"node-{draw(st.integers(0, 99)):02d}-{i}"
        labels = {"host": name}
        for key, values in (("zone", ["z1", "z2", "z3"]), ("rack", ["r1", "r2"])):
            value = draw(st.sampled_from([*values, None]))
            if value is not None:
                labels[key] = value
        if draw(st.integers(0, 5)) == 0:
            del labels["host"]
        if draw(st.booleans()):
            labels["disk"] = "ssd"
        manifest: dict[str, Any] = {"metadata": {"name": name, "labels": labels}}
        if draw(st.integers(0, 4)) == 0:
            manifest["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
        nodes.append(manifest)
    names = [n["metadata"]["name"] for n in nodes]
    pods = []
    for i in range(draw(st.integers(0, 15))):
        metadata: dict[str, Any] = {"name": f"old-{i}", "labels": {"app": draw(st.sampled_from(["web", "db"]))},
                                    "namespace": draw(st.sampled_from(["default", "default", "other"]))}
        if draw(st.integers(0, 5)) == 0:
            metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        bound = draw(st.sampled_from([*names, None, "gone"]))
        pods.append({"metadata": metadata, "spec": {"nodeName": bound} if bound else {}})
    constraints = []
    for key in draw(st.lists(st.sampled_from(KEYS), min_size=0, max_size=3, unique=True)):
        for hard in draw(st.sampled_from([(True,), (False,), (True, False)])):
            constraint: dict[str, Any] = {
                "topologyKey": key, "maxSkew": draw(st.integers(1, 3)),
                "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
                "nodeAffinityPolicy": draw(st.sampled_from(["Honor", "Ignore"])),
                "nodeTaintsPolicy": draw(st.sampled_from(["Honor", "Ignore"])), "kind": draw(st.sampled_from(KINDS))}
            if hard and draw(st.booleans()):
                constraint["minDomains"] = draw(st.integers(1, 4))
            constraints.append(constraint)
    node_selector = {"disk": "ssd"} if draw(st.booleans()) else {}
    tolerates = draw(st.booleans())
    tsc = []
    for c in constraints:
        manifest_constraint = {k: v for k, v in c.items() if k != "kind"}
        selector = {"web": {"matchLabels": {"app": "web"}}, "db": {"matchLabels": {"app": "db"}}, "empty": {},
                    "nil": None}[c["kind"]]
        if selector is not None:
            manifest_constraint["labelSelector"] = selector
        tsc.append(manifest_constraint)
    spec: dict[str, Any] = {"topologySpreadConstraints": tsc, "nodeSelector": node_selector}
    if tolerates:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    pod = {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": spec}
    return Scenario(pod, nodes, pods, constraints, node_selector, tolerates)


def reference_plan(s: Scenario, count: int) -> list[str]:
    """Kube's per-cycle work for every replica, on the scenario's plain description."""
    def selects(kind: str, app: str) -> bool:
        return kind in ("empty", app)

    def affinity_ok(n: dict[str, Any]) -> bool:
        return all(n["metadata"]["labels"].get(k) == v for k, v in s.node_selector.items())

    def taints_ok(n: dict[str, Any]) -> bool:
        return s.tolerates or not n.get("spec")

    names = {n["metadata"]["name"] for n in s.nodes}
    bound = [(p["spec"]["nodeName"], p["metadata"]["labels"]["app"]) for p in s.pods
             if p["spec"].get("nodeName") in names and p["metadata"]["namespace"] == "default"
             and "deletionTimestamp" not in p["metadata"]]
    hard = [c for c in s.constraints if c["whenUnsatisfiable"] == "DoNotSchedule"]
    soft = [c for c in s.constraints if c not in hard]

    def counts(c: dict[str, Any], group: list[dict[str, Any]]) -> dict[str, int]:
        result: dict[str, int] = {}
        for n in s.nodes:
            labels = n["metadata"]["labels"]
            if any(g["topologyKey"] not in labels for g in group):
                continue
            if (c["nodeAffinityPolicy"] == "Honor" and not affinity_ok(n)) or (
                    c["nodeTaintsPolicy"] == "Honor" and not taints_ok(n)):
                continue
            matching = 0 if c["kind"] in ("empty", "nil") else sum(
                1 for where, app in bound if where == n["metadata"]["name"] and selects(c["kind"], app))
            value = labels[c["topologyKey"]]
            result[value] = result.get(value, 0) + matching
        return result

    chosen: list[str] = []
    for _ in range(count):
        hard_counts = [counts(c, hard) for c in hard]
        soft_counts = [counts(c, soft) for c in soft]
        best: tuple[int, str] | None = None
        for n in s.nodes:
            labels = n["metadata"]["labels"]
            if not (affinity_ok(n) and taints_ok(n)) or any(c["topologyKey"] not in labels for c in hard):
                continue
            ok = True
            for c, cnt in zip(hard, hard_counts, strict=True):
                minimum = 2**31 - 1 if not cnt else 0 if len(cnt) < c.get("minDomains", 1) else min(cnt.values())
                ok &= cnt.get(labels[c["topologyKey"]], 0) + selects(c["kind"], "web") - minimum <= c["maxSkew"]
            if not ok:
                continue
            score = sum(cnt[labels[c["topologyKey"]]] for c, cnt in zip(hard, hard_counts, strict=True))
            if all(c["topologyKey"] in labels for c in soft):
                score += sum(cnt[labels[c["topologyKey"]]] for c, cnt in zip(soft, soft_counts, strict=True))
            else:
                score += PENALTY
            if best is None or (score, n["metadata"]["name"]) < best:
                best = (score, n["metadata"]["name"])
        if best is None:
            break
        chosen.append(best[1])
        bound.append((best[1], "web"))
    return chosen


def _placed(names: list[str]) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"new-{i}", "labels": {"app": "web"}}, "spec": {"nodeName": n}}
            for i, n in enumerate(names)]


class TestPlanSpreadProperties:
    """plan_spread on random clusters."""

    @settings(max_examples=150, deadline=None)
    @given(scenario=scenarios(), count=st.integers(0, 25))
    def test_matches_reference_and_every_step_passes_the_filter(self, scenario: Scenario, count: int) -> None:
        """The plan equals the reference, every replica passes feasible_nodes given the earlier ones (maxSkew)."""
        expected = reference_plan(scenario, count)
        try:
            plan = plan_spread(scenario.pod, count, scenario.nodes, scenario.pods)
        except errors.NotEnoughCandidates as error:
            assert error.chosen == expected and len(expected) < count and error.required == count
            plan = error.chosen
        else:
            assert plan == expected
        for step, name in enumerate(plan):
            assert name in feasible_nodes(scenario.pod, scenario.nodes, scenario.pods + _placed(plan[:step]))

    @settings(max_examples=60, deadline=None)
    @given(scenario=scenarios(), count=st.integers(1, 15), seed=st.integers(0, 2**32 - 1))
    def test_deterministic_under_permutation_and_inputs_untouched(self, scenario: Scenario, count: int,
                                                                 seed: int) -> None:
        """Shuffled nodes and pods give the same plan (or the same error), and no input is modified."""
        def outcome(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> object:
            try:
                return plan_spread(scenario.pod, count, nodes, pods)
            except errors.NotEnoughCandidates as error:
                return ("short", error.chosen)

        before = copy.deepcopy((scenario.pod, scenario.nodes, scenario.pods))
        first = outcome(scenario.nodes, scenario.pods)
        rng = random.Random(seed)
        nodes, pods = scenario.nodes[:], scenario.pods[:]
        rng.shuffle(nodes)
        rng.shuffle(pods)
        assert outcome(nodes, pods) == first
        assert (scenario.pod, scenario.nodes, scenario.pods) == before
