"""Tests for the Loki zone-aware replication planner and the zone-injection pod-template pieces."""

from __future__ import annotations

import copy
import pathlib
import subprocess
from typing import Any

import pytest
from workload_helpers import HOSTNAME, REGION, ZONE, lokistack, node, rules, zoned_nodes

from cloudzones import errors, placement
from cloudzones.workloads import findings, replication, zoneinject


def plan(stack: dict[str, Any], nodes: list[dict[str, Any]], **kw: Any) -> replication.ReplicationPlan:
    """Run the planner."""
    return replication.plan(stack, nodes, **kw)


def only(result: replication.ReplicationPlan, rule: str) -> findings.Finding:
    """The single finding of ``rule``."""
    matching = [f for f in result.findings if f.rule == rule]
    assert len(matching) == 1, rules(result.findings)
    return matching[0]


class TestValidation:
    """Rules checked before deploying, each with the offending values."""

    def test_factor_greater_than_zones_is_an_error(self) -> None:
        """factor 4 on 3 zones: an error naming both numbers and the zones (the operator never raises it)."""
        result = plan(lokistack(4, ingesters=6), zoned_nodes(3))
        finding = only(result, "factor-exceeds-zones")
        assert finding.severity is findings.Severity.ERROR and not result.ok
        assert "replication factor 4" in finding.message and "3 zone(s)" in finding.message
        assert "'eastus-1', 'eastus-2', 'eastus-3'" in finding.message

    def test_factor_equal_to_zones_warns_and_recommends_one_more_zone(self) -> None:
        """factor 3 on 3 zones: a warning recommending 4 zones; the plan is still ok."""
        result = plan(lokistack(3, ingesters=4), zoned_nodes(3))
        finding = only(result, "no-spare-zone")
        assert finding.severity is findings.Severity.WARNING and result.ok
        assert "4 zones are recommended" in finding.message

    def test_factor_below_zones_has_no_zone_finding(self) -> None:
        """factor 2 on 3 zones: neither the error nor the warning."""
        result = plan(lokistack(2), zoned_nodes(3))
        assert not {"factor-exceeds-zones", "no-spare-zone"} & set(rules(result.findings))

    def test_key_missing_on_some_nodes_names_them(self) -> None:
        """Two schedulable nodes without the zone label (one absent, one empty) are named; tainted ones ignored."""
        nodes = [*zoned_nodes(3, 1), node("bare", None), node("blank", ""),
                 node("system", None, taints=[{"key": "CriticalAddonsOnly", "effect": "NoSchedule"}]),
                 node("cordoned", None, unschedulable=True)]
        result = plan(lokistack(2), nodes)
        finding = only(result, "topology-key-missing")
        assert finding.severity is findings.Severity.ERROR and finding.subject == ZONE
        assert "2 of 5 schedulable node(s)" in finding.message and "'bare', 'blank'" in finding.message
        assert "system" not in finding.message and "cordoned" not in finding.message

    def test_multiple_keys_join_values_with_underscore(self) -> None:
        """Zones are the label values of every key joined with '_', in key order."""
        nodes = zoned_nodes(2, 1, region="westus")
        result = plan(lokistack(2, keys=(ZONE, REGION), ingesters=3), nodes)
        assert result.zones == ("westus-1_westus", "westus-2_westus")
        assert replication.zone_value({ZONE: "a", REGION: "r", HOSTNAME: "h"}, [HOSTNAME, ZONE, REGION]) == "h_a_r"
        assert set(result.components[0].zones) == {"westus-1_westus", "westus-2_westus"}
        assert [c["topologyKey"] for c in result.components[0].topology_spread_constraints] == [ZONE, REGION]

    def test_deprecated_replication_factor_is_accepted_with_a_warning(self) -> None:
        """spec.replicationFactor gives the factor, warns, and leaves zone awareness off."""
        stack = lokistack(None, replicationFactor=2)
        result = plan(stack, zoned_nodes(3))
        assert result.factor == 2 and result.topology_keys == () and result.ok
        assert only(result, "deprecated-replication-factor").severity is findings.Severity.WARNING
        assert only(result, "zone-awareness-off").severity is findings.Severity.INFO

    def test_both_factor_fields_are_refused(self) -> None:
        """spec.replication together with spec.replicationFactor: the Loki webhook's error."""
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            plan(lokistack(2, replicationFactor=3), zoned_nodes(3))
        assert rules(caught.value.findings) == ["replication-conflict"]

    @pytest.mark.parametrize("block", [{"zones": [{"topologyKey": ZONE}]}, {}])
    def test_replication_block_without_factor_conflicts_too(self, block: dict[str, Any]) -> None:
        """Any spec.replication block (zones only, or empty) next to replicationFactor > 0 is the webhook's error."""
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            plan(lokistack(None, replication=block, replicationFactor=2), zoned_nodes(3))
        assert rules(caught.value.findings) == ["replication-conflict"]

    def test_replication_block_with_factor_zero_is_no_conflict(self) -> None:
        """replicationFactor 0 is unset for the webhook: spec.replication alone decides."""
        result = plan(lokistack(2, replicationFactor=0), zoned_nodes(3))
        assert result.factor == 2 and "replication-conflict" not in rules(result.findings)

    @pytest.mark.parametrize("factor", [-1, "two", 1.5, True])
    def test_malformed_factor(self, factor: Any) -> None:
        """A factor that is not a positive integer is refused with its value."""
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            plan(lokistack(factor), zoned_nodes(3))
        assert rules(caught.value.findings) == ["factor-invalid"] and repr(factor) in str(caught.value)

    def test_missing_factor_without_size(self) -> None:
        """No factor and no known size: an error."""
        stack = lokistack(None)
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            plan(stack, zoned_nodes(3))
        assert rules(caught.value.findings) == ["factor-missing"]

    def test_size_gives_default_factor_and_ingesters(self) -> None:
        """1x.small without factor or template: factor 2 and 3 ingesters, both noted."""
        stack = {"metadata": {"name": "logs"}, "spec": {"size": "1x.small"}}
        result = plan(stack, zoned_nodes(3))
        assert result.factor == 2 and [(c.name, c.replicas) for c in result.components] == [("ingester", 3)]
        assert {"default-factor", "default-ingester-replicas"} <= set(rules(result.findings))

    def test_every_malformed_zone_entry_is_reported_at_once(self) -> None:
        """A missing topologyKey, a zero maxSkew and a repeated key give three errors in one exception."""
        stack = lokistack(2)
        stack["spec"]["replication"]["zones"] = [{"maxSkew": 1}, {"topologyKey": ZONE, "maxSkew": 0},
                                                 {"topologyKey": REGION}, {"topologyKey": REGION}]
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            plan(stack, zoned_nodes(3))
        assert rules(caught.value.findings) == ["zone-topology-key", "zone-max-skew", "zone-duplicate-key"]

    def test_unknown_component_lists_valid_ones(self) -> None:
        """spec.template.ingestor is not a component; the message lists the real ones."""
        stack = lokistack(2)
        stack["spec"]["template"]["ingestor"] = {"replicas": 2}
        with pytest.raises(errors.InvalidWorkloadSpec) as caught:
            plan(stack, zoned_nodes(3))
        assert rules(caught.value.findings) == ["unknown-component"]
        assert "queryFrontend" in str(caught.value) and "indexGateway" in str(caught.value)

    def test_ingester_replicas_not_above_factor_warn(self) -> None:
        """2 ingesters for factor 2: Loki's InsufficientIngesterReplicas warning."""
        result = plan(lokistack(2, ingesters=2), zoned_nodes(3))
        assert only(result, "ingester-replicas").severity is findings.Severity.WARNING

    def test_no_nodes_and_no_schedulable_nodes(self) -> None:
        """Without nodes nothing can be checked; with only cordoned nodes no zone exists."""
        assert rules(plan(lokistack(2), []).findings)[0] == "no-nodes"
        cordoned = [node("a", "eastus-1", unschedulable=True)]
        assert "no-schedulable-nodes" in rules(plan(lokistack(2), cordoned).findings)

    def test_tolerance_reports_reads_and_writes(self) -> None:
        """factor 3 on 3 zones tolerates one zone loss for both; factor 2 on 3 zones none for writes."""
        three = plan(lokistack(3, ingesters=4), zoned_nodes(3)).tolerance
        two = plan(lokistack(2), zoned_nodes(3)).tolerance
        assert three is not None and (three.write_zone_failures, three.read_zone_failures) == (1, 1)
        assert two is not None and (two.write_zone_failures, two.read_zone_failures) == (0, 1)


class TestPlacement:
    """Spread constraints and where plan_spread puts each component."""

    def test_spread_constraints_select_the_component(self) -> None:
        """One DoNotSchedule entry per zone key with its maxSkew and a component + instance selector."""
        result = plan(lokistack(2, max_skew=2), zoned_nodes(3))
        (constraint,) = result.components[0].topology_spread_constraints
        assert constraint == {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                              "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "ingester",
                                                                "app.kubernetes.io/instance": "logs"}}}

    def test_template_key_order_does_not_matter(self) -> None:
        """The API server returns template keys sorted, a file as written: both plan the components in one order."""
        template = {"gateway": {"replicas": 2}, "querier": {"replicas": 2}, "distributor": {"replicas": 2},
                    "ingester": {"replicas": 3}}
        written = plan(lokistack(2, template=template), zoned_nodes(3))
        stored = plan(lokistack(2, template=dict(sorted(template.items()))), zoned_nodes(3))
        assert [c.name for c in written.components] == [c.name for c in stored.components]
        assert written.as_dict() == stored.as_dict()

    def test_replicas_land_in_distinct_zones_as_plan_spread_says(self) -> None:
        """Three ingesters over three zones, on the nodes plan_spread picks for the same pod."""
        nodes = zoned_nodes(3)
        result = plan(lokistack(2), nodes)
        ingester = result.components[0]
        assert sorted(ingester.zones) == ["eastus-1", "eastus-2", "eastus-3"] and not ingester.stuck
        spec, _ = replication.parse_spec(lokistack(2))
        pod = replication._pod(spec, spec.components[0])
        assert list(ingester.nodes) == placement.plan_spread(pod, 3, nodes)

    def test_stuck_plan_is_an_error_with_the_partial_placement(self) -> None:
        """Zone 3 cordoned yet listed: six ingesters, only two placeable (maxSkew 1 against an empty zone)."""
        nodes = [node(f"n{z}{i}", f"eastus-{z}", unschedulable=z == 3,
                      taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}] if z == 3 else None)
                 for z in (1, 2, 3) for i in (0, 1)]
        result = plan(lokistack(2, ingesters=6), nodes)
        ingester = result.components[0]
        assert ingester.stuck and len(ingester.nodes) == 2 and set(ingester.zones) == {"eastus-1", "eastus-2"}
        finding = only(result, "rollout-stuck")
        assert finding.subject == "ingester" and "2 of 6" in finding.message and "'eastus-3'" in finding.message

    def test_unavailable_zone_what_if(self) -> None:
        """maxSkew 1: losing any zone while its nodes stay listed stalls 3 ingesters at 2; maxSkew 2 does not."""
        tight = plan(lokistack(2), zoned_nodes(3))
        assert tight.components[0].stuck_if_unavailable == (("eastus-1", 2), ("eastus-2", 2), ("eastus-3", 2))
        assert "'eastus-1' or 'eastus-2' or 'eastus-3'" in only(tight, "stuck-if-zone-unavailable").message
        loose = plan(lokistack(2, max_skew=2), zoned_nodes(3))
        assert loose.components[0].stuck_if_unavailable == ()
        assert "stuck-if-zone-unavailable" not in rules(loose.findings)

    def test_inputs_are_not_modified_and_output_is_deterministic(self) -> None:
        """The manifests stay as given and shuffled nodes give the same plan."""
        stack, nodes = lokistack(2), zoned_nodes(3)
        before = copy.deepcopy((stack, nodes))
        first = plan(stack, nodes).as_dict()
        assert (stack, nodes) == before
        assert plan(stack, list(reversed(nodes))).as_dict() == first


class TestZoneInjection:
    """The downward-API env, volume and waiting init container."""

    def test_single_key_reads_the_annotation_named_like_the_label(self) -> None:
        """INSTANCE_AVAILABILITY_ZONE comes straight from the topology.kubernetes.io/zone annotation."""
        pieces = zoneinject.zone_injection([ZONE])
        field = "metadata.annotations['topology.kubernetes.io/zone']"
        assert pieces.env == ({"name": "INSTANCE_AVAILABILITY_ZONE", "valueFrom": {"fieldRef": {"fieldPath": field}}},)
        assert pieces.volume["downwardAPI"]["items"] == [{"path": "zone-0", "fieldRef": {"fieldPath": field}}]
        assert pieces.init_container["volumeMounts"][0]["name"] == pieces.volume["name"]
        assert pieces.annotations == (ZONE,)

    def test_several_keys_compose_the_value_with_underscore(self) -> None:
        """One env var per key, then $(A)_$(B) for the combined value (Kubernetes expands it)."""
        pieces = zoneinject.zone_injection([ZONE, REGION])
        assert [e["name"] for e in pieces.env] == ["TOPOLOGY_VALUE_0", "TOPOLOGY_VALUE_1", "INSTANCE_AVAILABILITY_ZONE"]
        assert pieces.env[-1]["value"] == "$(TOPOLOGY_VALUE_0)_$(TOPOLOGY_VALUE_1)"
        assert pieces.env[1]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.annotations['{REGION}']"

    def test_init_script_waits_until_every_file_is_non_empty(self, tmp_path: pathlib.Path) -> None:
        """The generated shell loop blocks on an empty annotation file and exits once it is written."""
        pieces = zoneinject.zone_injection([ZONE, REGION], interval_seconds=0)
        script = pieces.init_container["command"][2].replace(zoneinject.MOUNT_PATH, str(tmp_path))
        (tmp_path / "zone-0").write_text("eastus-1")
        (tmp_path / "zone-1").write_text("")
        process = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True)  # noqa: S607
        assert process.stdout is not None
        assert process.stdout.readline() == f"Waiting for annotation {REGION} to be set on this pod\n"
        assert process.poll() is None
        (tmp_path / "zone-1").write_text("eastus")
        out, _ = process.communicate(timeout=10)
        assert process.returncode == 0 and out.endswith("availability zone annotations are set\n")

    @pytest.mark.parametrize("keys", [[], [""], [ZONE, ZONE]])
    def test_bad_keys(self, keys: list[str]) -> None:
        """No key, an empty key or a repeated key is refused."""
        with pytest.raises(errors.InvalidWorkloadSpec):
            zoneinject.zone_injection(keys)

    def test_plan_includes_pieces_and_the_annotator_note(self) -> None:
        """zone_injection=True adds the pieces, with the image given, and says what the annotator must copy."""
        result = plan(lokistack(2), zoned_nodes(3), zone_injection=True, image="registry.example/loki:3")
        assert result.zone_injection is not None
        assert result.zone_injection.init_container["image"] == "registry.example/loki:3"
        assert ZONE in only(result, "zone-injection").message
        assert plan(lokistack(None, replicationFactor=2), zoned_nodes(3), zone_injection=True).zone_injection is None


class TestBoundedWork:
    """A file cannot ask for unbounded work."""

    def test_huge_replicas_refused(self) -> None:
        """10^30 replicas of a component is refused at once with the bound, not planned forever."""
        stack = lokistack(2)
        stack["spec"]["template"] = {"ingester": {"replicas": 10**30}}
        with pytest.raises(errors.InvalidWorkloadSpec, match="more than the 100,000 this planner accepts"):
            plan(stack, zoned_nodes(3))
