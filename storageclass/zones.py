"""Which zone a new disk goes in, and which rule decided: `explain_zones`, `select_zones`, `choose_zones`.

Rules are tried in this order (Kubernetes' ``SelectZonesForVolume`` order, with the Azure zones
KEP's ``no zoned nodes`` error instead of upstream's silent unzoned disk):

1. zone-redundant SKU, or ``zoned: "false"`` → no zone;
2. a selected node (WaitForFirstConsumer) → its zone label (GA, then beta), used as is;
3. ``allowedTopologies`` → round-robin over the allowed zones that have nodes, else over all
   allowed zones (an autoscaler may add nodes there);
4. ``zone`` → that zone; 5. ``zones`` → round-robin over them;
6. round-robin over the zones that have nodes (fault-domain labels ignored); none → `NoZonedNodes`.

Under WaitForFirstConsumer without a selected node the later rules apply, as in Kubernetes.
Round-robin is *balanced* by default and Kubernetes-compatible on request (``mode="kubernetes"``);
the mode changes only the round-robin, never the rules. See `cloudzones.placement.volumes` for
the difference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from cloudzones import errors, labels
from cloudzones.placement import volumes
from storageclass import zonelabel
from storageclass.rules import Rule
from storageclass.spec import StorageClassSpec

Mode = Literal["balanced", "kubernetes"]
MODES: Final = ("balanced", "kubernetes")


@dataclasses.dataclass(frozen=True)
class ZoneChoice:
    """The zones chosen for a disk, and why."""

    zones: tuple[str, ...]
    """The zones to create the disk in, sorted; ``()`` means the disk gets no zone."""
    rule: Rule
    """The rule that decided."""
    reason: str
    """One sentence saying how the rule decided, for people."""
    candidates: tuple[str, ...] = ()
    """The zones the rule chose among (sorted)."""
    mode: str = "balanced"
    """The round-robin mode that was asked for (``balanced`` or ``kubernetes``)."""
    ignored: tuple[str, ...] = ()
    """Node zone labels that were not availability zones (fault domains, other regions)."""

    def as_dict(self) -> dict[str, Any]:
        """A plain dict for JSON / YAML output."""
        return {"zones": list(self.zones), "rule": self.rule.value, "reason": self.reason,
                "candidates": list(self.candidates), "mode": self.mode, "ignored": list(self.ignored)}


def choose_zones(zones: Iterable[str], pvc_name: str, count: int = 1) -> set[str]:
    """The Kubernetes-compatible choice: the same zones as kube's ``ChooseZonesForVolume``."""
    return volumes.kubernetes_zones(zones, pvc_name, count)


def select_zones(spec: StorageClassSpec, *, pvc_name: str, active_zones: Iterable[str],
                 selected_node: Mapping[str, Any] | None = None, replicas: int = 1,
                 mode: Mode = "balanced", statefulset: str | None = None) -> list[str]:
    """The zones to create the disk in (``[]``: no zone); :func:`explain_zones` without the reason."""
    return list(explain_zones(spec, pvc_name=pvc_name, active_zones=active_zones, selected_node=selected_node,
                              replicas=replicas, mode=mode, statefulset=statefulset).zones)


def explain_zones(spec: StorageClassSpec, *, pvc_name: str, active_zones: Iterable[str],
                  selected_node: Mapping[str, Any] | None = None, replicas: int = 1,
                  mode: Mode = "balanced", statefulset: str | None = None) -> ZoneChoice:
    """Choose the zones for the disk of claim ``pvc_name`` and say which rule decided.

    ``active_zones`` are the zone labels of the cluster's nodes (fault domains and other regions'
    zones are ignored); ``selected_node`` is the node manifest the scheduler picked under
    WaitForFirstConsumer; ``mode`` is ``"balanced"`` (default) or ``"kubernetes"``;
    ``statefulset`` names the claim's StatefulSet when known (balanced mode then splits the claim
    name exactly). Raises `NoZonedNodes` or `InvalidStorageClass`, whose ``rule`` says which rule failed.
    """
    if mode not in MODES:
        raise errors.ConfigError(f"round-robin mode must be one of {', '.join(MODES)}, got {mode!r}")
    if replicas < 1:
        raise errors.ConfigError(f"a disk needs at least one replica, got replicas={replicas!r}")
    chooser = _Chooser(storage_class=spec.name, pvc_name=pvc_name, replicas=replicas, mode=mode,
                       statefulset=statefulset)
    if spec.zone_redundant:
        return ZoneChoice((), Rule.ZONE_REDUNDANT, f"skuName {spec.sku} is zone-redundant: the disk gets no zone "
                          f"and attaches from every zone of the region", mode=mode)
    if not spec.zoned:
        if selected_node is not None:
            _refuse_zoned_node(spec, selected_node, chooser)
        return ZoneChoice((), Rule.UNZONED, 'zoned is "false": the disk gets no zone, and only unzoned nodes '
                          "can attach it", mode=mode)
    region = spec.region or (zonelabel.node_region(selected_node) if selected_node is not None else "") or None
    active, ignored = zonelabel.split_active(active_zones, region)
    if selected_node is not None:
        return _from_node(spec, selected_node, region=region, active=active, ignored=tuple(ignored),
                          chooser=chooser)
    if spec.allowed_zones:
        return _from_allowed(spec, active, tuple(ignored), chooser)
    if spec.zone is not None:
        if replicas > 1:
            raise _fail(errors.InvalidStorageClass, chooser, Rule.ZONE_REPLICAS,
                        f"zone={spec.zone!r} names one zone but the volume needs {replicas} replicas; "
                        f"use zones or allowedTopologies")
        return ZoneChoice((spec.zone,), Rule.ZONE, f"the zone parameter pins the disk to {spec.zone}",
                          (spec.zone,), mode, tuple(ignored))
    if spec.zones:
        if len(spec.zones) < replicas:
            raise _fail(errors.InvalidStorageClass, chooser, Rule.NOT_ENOUGH_ZONES,
                        f"zones={','.join(spec.zones)!r} lists {len(spec.zones)} zone(s) but the volume "
                        f"needs {replicas}")
        chosen = chooser.pick(spec.zones)
        return ZoneChoice(chosen, Rule.ZONES, f"{chooser.describe()} over the zones parameter "
                          f"({', '.join(spec.zones)}) picked {', '.join(chosen)}", spec.zones, mode, tuple(ignored))
    if not active:
        seen = f" (node zone labels seen: {', '.join(repr(v) for v in ignored)})" if ignored else ""
        raise _fail(errors.NoZonedNodes, chooser, Rule.ACTIVE_ZONES,
                    f"no node is in an availability zone{_of(region)}{seen}, so a zoned disk has nowhere to go; "
                    f'add zoned nodes, set zone, zones or allowedTopologies, or use zoned: "false"')
    if len(active) < replicas:
        raise _fail(errors.NoZonedNodes, chooser, Rule.NOT_ENOUGH_ZONES,
                    f"only {len(active)} zone(s) have nodes ({', '.join(active)}) but the volume needs {replicas}")
    chosen = chooser.pick(active)
    return ZoneChoice(chosen, Rule.ACTIVE_ZONES, f"no selected node, allowedTopologies, zone or zones: "
                      f"{chooser.describe()} over the zones that have nodes ({', '.join(active)}) picked "
                      f"{', '.join(chosen)}", tuple(active), mode, tuple(ignored))


@dataclasses.dataclass(frozen=True)
class _Chooser:
    storage_class: str
    pvc_name: str
    replicas: int
    mode: str
    statefulset: str | None

    def describe(self) -> str:
        return f"{self.mode} round-robin for claim {self.pvc_name!r}"

    def pick(self, zones: Sequence[str], count: int | None = None) -> tuple[str, ...]:
        wanted = self.replicas if count is None else count
        if self.mode == "kubernetes":
            chosen = volumes.kubernetes_zones(zones, self.pvc_name, wanted)
            if not chosen:
                # Only when a huge ordinal wraps Go's uint32 loop bound; Kubernetes fails the same way.
                raise _fail(errors.NoZonedNodes, self, Rule.NOT_ENOUGH_ZONES,
                            "Kubernetes' round-robin finds no zone for this claim (its ordinal overflows 32 bits); "
                            "use the balanced mode")
            return tuple(sorted(chosen))
        return tuple(sorted(volumes.balanced_zones(zones, self.pvc_name, wanted, statefulset=self.statefulset)))


def _fail(kind: type[errors.InvalidStorageClass] | type[errors.NoZonedNodes], chooser: _Chooser, rule: Rule,
          detail: str) -> errors.InvalidStorageClass | errors.NoZonedNodes:
    where = f" of StorageClass {chooser.storage_class!r}" if chooser.storage_class else ""
    return kind(f"cannot choose a zone for claim {chooser.pvc_name!r}{where}: rule {rule.value!r}: {detail}",
                rule=rule.value)


def _of(region: str | None) -> str:
    return f" of region {region!r}" if region else ""


def _from_allowed(spec: StorageClassSpec, active: list[str], ignored: tuple[str, ...],
                  chooser: _Chooser) -> ZoneChoice:
    allowed = spec.allowed_zones
    with_nodes = tuple(zone for zone in allowed if zone in set(active))
    if len(with_nodes) >= chooser.replicas:
        chosen = chooser.pick(with_nodes)
        return ZoneChoice(chosen, Rule.ALLOWED_TOPOLOGIES,
                          f"allowedTopologies allows {', '.join(allowed)}; {chooser.describe()} over those with "
                          f"nodes ({', '.join(with_nodes)}) picked {', '.join(chosen)}",
                          with_nodes, chooser.mode, ignored)
    if len(allowed) >= chooser.replicas:
        chosen = chooser.pick(allowed)
        return ZoneChoice(chosen, Rule.ALLOWED_TOPOLOGIES_WITHOUT_NODES,
                          f"allowedTopologies allows {', '.join(allowed)} but too few of them have nodes yet (an "
                          f"autoscaler may add some); {chooser.describe()} over all of them picked {', '.join(chosen)}",
                          allowed, chooser.mode, ignored)
    raise _fail(errors.InvalidStorageClass, chooser, Rule.NOT_ENOUGH_ZONES,
                f"allowedTopologies allows {len(allowed)} zone(s) ({', '.join(allowed)}) but the volume "
                f"needs {chooser.replicas}")


def _from_node(spec: StorageClassSpec, node: Mapping[str, Any], *, region: str | None, active: list[str],
               ignored: tuple[str, ...], chooser: _Chooser) -> ZoneChoice:
    name = zonelabel.node_name(node)
    if spec.zone is not None or spec.zones:
        given = f"zone={spec.zone!r}" if spec.zone is not None else f"zones={','.join(spec.zones)!r}"
        raise _fail(errors.InvalidStorageClass, chooser, Rule.ZONE_WITH_WAIT_FOR_FIRST_CONSUMER,
                    f"{given} cannot be used when the scheduler picks the node ({name!r}); "
                    f"use allowedTopologies to constrain zones")
    key, zone = zonelabel.node_zone(node)
    if not zone:
        unzoned = (" (it has a fault-domain label, so it is unzoned)"
                   if labels.FAULT_DOMAIN in zonelabel.node_labels(node) else "")
        raise _fail(errors.NoZonedNodes, chooser, Rule.SELECTED_NODE,
                    f"selected node {name!r} has neither a {labels.ZONE} nor a {labels.BETA_ZONE} label{unzoned}, "
                    f"so the disk's zone cannot be known")
    if zonelabel.is_fault_domain(zone):
        raise _fail(errors.NoZonedNodes, chooser, Rule.SELECTED_NODE,
                    f"selected node {name!r} is unzoned ({key}={zone!r} is a fault domain), and zoned disks cannot "
                    f'attach to unzoned nodes; use a StorageClass with zoned: "false" for unzoned nodes, or '
                    f"allowedTopologies to keep these pods on zoned nodes")
    if not zonelabel.is_zone(zone, region):
        raise _fail(errors.NoZonedNodes, chooser, Rule.SELECTED_NODE,
                    f"selected node {name!r} has {key}={zone!r}, which is not an availability zone{_of(region)}")
    if chooser.replicas == 1:
        return ZoneChoice((zone,), Rule.SELECTED_NODE,
                          f"volumeBindingMode WaitForFirstConsumer: the scheduler picked node {name!r}, "
                          f"whose {key} label is {zone}", (zone,), chooser.mode, ignored)
    # A replicated volume: the node's zone plus others from allowedTopologies, else from zones with nodes.
    pool = tuple(sorted(set(spec.allowed_zones or active) | {zone}))
    if len(pool) < chooser.replicas:
        raise _fail(errors.NoZonedNodes, chooser, Rule.NOT_ENOUGH_ZONES,
                    f"only {len(pool)} zone(s) ({', '.join(pool)}) are available but the volume "
                    f"needs {chooser.replicas}")
    rest = [other for other in pool if other != zone]
    others = chooser.pick(rest, chooser.replicas - 1)
    return ZoneChoice(tuple(sorted({zone, *others})), Rule.SELECTED_NODE,
                      f"volumeBindingMode WaitForFirstConsumer: node {name!r} is in {zone}; {chooser.describe()} "
                      f"over {', '.join(rest)} added {', '.join(others)}", pool, chooser.mode, ignored)


def _refuse_zoned_node(spec: StorageClassSpec, node: Mapping[str, Any], chooser: _Chooser) -> None:
    key, zone = zonelabel.node_zone(node)
    region = spec.region or zonelabel.node_region(node) or None
    if zone and not zonelabel.is_fault_domain(zone) and zonelabel.is_zone(zone, region):
        raise _fail(errors.InvalidStorageClass, chooser, Rule.UNZONED_DISK_ON_ZONED_NODE,
                    f'the class has zoned="false" but the scheduler picked node {zonelabel.node_name(node)!r} in '
                    f"zone {zone} ({key}), and an unzoned disk cannot attach to a zoned node; keep this class's "
                    f"pods on unzoned nodes or make it zoned")
