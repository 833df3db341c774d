"""The steps of ``cloudzones simulate``: label nodes, provision disks, admit static PVs, plan a workload.

Each step drives the real component (controller, node agent, provisioner, webhook over TLS,
placement core) against the loopback fakes and returns plain rows for the report.
"""

from __future__ import annotations

import base64
import collections
import json
import uuid
from collections.abc import Callable
from typing import Any

import jsonpatch
import requests

from cloudzones import errors, is_availability_zone, labels, placement
from cloudzones.kube import leader
from cloudzones.services import annotator, controller, nodeagent
from cloudzones.services.webhook import review, server
from cloudzones.simulation.world import World
from storageclass import Provisioner

Progress = Callable[[str], None]


def _drain(labeller: controller.NodeLabeler) -> list[str]:
    outcomes, outcome = [], labeller.process_one(timeout=10)
    while outcome is not None:
        outcomes.append(outcome)
        outcome = labeller.process_one(timeout=0.5)
    return outcomes


def label_nodes(world: World, progress: Progress) -> dict[str, Any]:
    """The controller (holding the Lease) labels every node through ARM; each node agent then checks via IMDS."""
    provider = world.provider()
    labeller = controller.NodeLabeler(world.client, provider)
    elector = leader.LeaderElector(world.client, name="cloudzones-controller", namespace="kube-system",
                                   identity="simulate-controller")
    if not elector.try_acquire_or_renew():
        raise errors.CloudZonesError("the simulated controller could not take its Lease")
    progress("controller: labelling nodes through ARM")
    labeller.informer.start()
    labeller.informer.wait_for_sync(30)
    labeller.set_leading(True)
    outcomes = collections.Counter(_drain(labeller))
    labeller.stop()
    elector.release()
    agents: dict[str, str] = {}
    for index, machine in enumerate(world.scenario.machines):
        progress(f"node agents: {index + 1}/{len(world.scenario.machines)}")
        try:
            agents[machine.node] = nodeagent.NodeAgent(world.client, world.provider(imds_node=machine.node),
                                                       machine.node).check_once()
        except errors.CloudZonesError as exc:
            agents[machine.node] = f"error: {exc}"
    rows = []
    region = world.scenario.region
    for machine in world.scenario.machines:
        got = world.api.get("nodes", machine.node)["metadata"].get("labels", {})
        rows.append({"node": machine.node, "kind": machine.kind, "group": machine.group,
                     "zone": got.get(labels.ZONE, ""), "faultDomain": got.get(labels.FAULT_DOMAIN, ""),
                     "availabilityZone": is_availability_zone(got.get(labels.ZONE, ""), region),
                     "expected": f"{region}-{machine.zone}" if machine.zone else str(machine.fault_domain),
                     "nodeAgent": agents[machine.node]})
    return {"rows": rows, "controller": dict(outcomes), "armCalls": provider.arm_calls.total,
            "armBudget": len({m.group for m in world.scenario.machines if m.kind == "vmss"})
            + sum(2 for m in world.scenario.machines if m.kind != "vmss")}


def _claim_manifest(claim: Any) -> dict[str, Any]:
    # No uid: the API server (fake or real) assigns one on create, and the disk is named after that one.
    meta: dict[str, Any] = {"name": claim.name, "namespace": "default"}
    if claim.statefulset:
        # As the StatefulSet controller does with a PVC retention policy: the owner names the set exactly.
        meta["labels"] = {"app": claim.statefulset}
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": claim.statefulset,
                                    "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, claim.statefulset)), "controller": True}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": claim.storage_class,
                     "resources": {"requests": {"storage": claim.size}}}}


def provision(world: World, progress: Progress) -> dict[str, Any]:
    """Provision every claim with the real Provisioner; then provision one again to prove idempotency."""
    scenario = world.scenario
    provider = world.provider()
    provisioner = Provisioner(provider, region=scenario.region)
    classes = {c["metadata"]["name"]: c for c in scenario.storage_classes}
    active = sorted({n["metadata"].get("labels", {}).get(labels.ZONE, "") for n in world.api.list("nodes")} - {""})
    rows, first_ok = [], None
    for index, claim in enumerate(scenario.claims):
        progress(f"provisioner: claim {index + 1}/{len(scenario.claims)}")
        # Provision the claim as stored: a real API server assigns its own uid, which names the disk.
        pvc = world.api.create("persistentvolumeclaims", _claim_manifest(claim), namespace="default")
        selected = world.api.get("nodes", claim.selected_node) if claim.selected_node else None
        row: dict[str, Any] = {"claim": claim.name, "storageClass": claim.storage_class,
                               "expectError": claim.expect_error, "statefulSet": claim.statefulset,
                               "ordinal": claim.ordinal}
        try:
            pv, choice = provisioner.provision_explained(pvc, classes[claim.storage_class], active_zones=active,
                                                         selected_node=selected)
            # Report what the API server stored (a real one validates and may default fields).
            pv = world.api.create("persistentvolumes", pv)
        except errors.CloudZonesError as exc:
            row.update(ok=False, rule=str(getattr(exc, "rule", "") or type(exc).__name__), error=str(exc))
            rows.append(row)
            continue
        disk = world.arm.disks[pv["metadata"]["name"]]
        row.update(ok=True, rule=str(choice.rule), zone=(choice.zones[0] if choice.zones else ""),
                   disk=disk["name"], diskZones=list(disk.get("zones") or []), sku=disk["sku"]["name"],
                   affinity=pv["spec"]["nodeAffinity"], pv=pv["metadata"]["name"])
        rows.append(row)
        first_ok = first_ok or (pvc, classes[claim.storage_class], selected)
    puts_before = world.arm.calls[("PUT", "disks")]
    if first_ok is not None:
        provisioner.provision(first_ok[0], first_ok[1], active_zones=active, selected_node=first_ok[2])
    return {"rows": rows, "activeZones": active, "secondRunPuts": world.arm.calls[("PUT", "disks")] - puts_before}


def admit_static_volumes(world: World, progress: Progress) -> dict[str, Any]:
    """Send hand-made PVs through the real webhook over TLS and create them as the API server would."""
    provider = world.provider()
    srv = server.serve(host="127.0.0.1", port=0, cert_file=str(world.tls.cert_file), key_file=str(world.tls.key_file),
                       review_fn=lambda body: review.review(body, labels_for_volume=provider.labels_for_volume))
    rows = []
    try:
        for index, volume in enumerate(world.scenario.static_volumes):
            progress(f"webhook: volume {index + 1}/{len(world.scenario.static_volumes)}")
            pv: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume["name"]},
                                  "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                                           "persistentVolumeReclaimPolicy": "Retain"}}
            if "disk" in volume:
                zone = f"{world.scenario.region}-{volume['zone']}" if volume.get("zone") else None
                disk, _ = provider.ensure_disk(str(volume["disk"]), 10, "Premium_LRS", zone)
                pv["spec"]["azureDisk"] = {"diskName": disk.name, "diskURI": disk.id, "kind": "Managed"}
            else:
                pv["spec"]["nfs"] = dict(volume.get("nfs") or {})
            body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
                "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
                "operation": "CREATE", "object": pv, "dryRun": False}}
            answer = requests.post(f"{srv.url}/mutate-pv", json=body, verify=str(world.tls.ca_file), timeout=10).json()
            response = answer["response"]
            if response.get("patch"):
                pv = jsonpatch.apply_patch(pv, json.loads(base64.b64decode(response["patch"])))
            pv = world.api.create("persistentvolumes", pv)
            rows.append({"volume": volume["name"], "azure": "disk" in volume, "patched": bool(response.get("patch")),
                         "allowed": response["allowed"], "labels": pv["metadata"].get("labels", {}),
                         "affinity": pv["spec"].get("nodeAffinity")})
    finally:
        srv.shutdown()
        srv.server_close()
    return {"rows": rows}


def plan_workload(world: World, progress: Progress) -> dict[str, Any] | None:
    """Place the workload's replicas with the placement core, bind its pods, and report zone-failure tolerance."""
    workload = world.scenario.workload
    if workload is None:
        return None
    progress(f"placement: planning {workload.replicas} replicas of {workload.name}")
    # Unzoned nodes carry a fault domain in the zone label; spreading over "zones" must not count them,
    # so the pod requires nodes without our fault-domain label.
    unzoned_excluded = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": labels.FAULT_DOMAIN, "operator": "DoesNotExist"}]}]}}
    template = {"metadata": {"namespace": "default", "labels": {"app": workload.name}},
                "spec": {"affinity": {"nodeAffinity": unzoned_excluded}, "topologySpreadConstraints": [{
                    "maxSkew": workload.max_skew, "topologyKey": workload.topology_key,
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": workload.name}}}]}}
    nodes = world.api.list("nodes")
    try:
        plan = placement.plan_spread(template, workload.replicas, nodes)
    except errors.NotEnoughCandidates as exc:
        return {"name": workload.name, "error": str(exc), "plan": list(exc.chosen)}
    zone_of = {n["metadata"]["name"]: n["metadata"].get("labels", {}).get(workload.topology_key, "") for n in nodes}
    for ordinal, node in enumerate(plan):
        world.api.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": f"{workload.name}-{ordinal}", "namespace": "default",
                                               "labels": {"app": workload.name}},
                                  "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]}},
                         namespace="default")
    progress("annotator: copying node zones onto the workload's pods")
    pods = annotator.PodZoneAnnotator(world.client, label_selector=f"app={workload.name}")
    annotated = collections.Counter(str(pods.run_once(f"default/{workload.name}-{i}").value) for i in range(len(plan)))
    zones = [zone_of[node] for node in plan]
    report = placement.failure_report(zones, workload.replication_factor)
    return {"name": workload.name, "plan": [{"pod": f"{workload.name}-{i}", "node": n, "zone": zone_of[n]}
                                            for i, n in enumerate(plan)],
            "perZone": dict(collections.Counter(zones)), "maxSkew": workload.max_skew, "annotator": dict(annotated),
            "podAnnotations": {p["metadata"]["name"]: p["metadata"].get("annotations", {})
                               for p in world.api.list("pods", namespace="default")},
            "replicationFactor": workload.replication_factor, "tolerance": {
                "zones": list(report.zones), "writeZoneFailures": report.write_zone_failures,
                "readZoneFailures": report.read_zone_failures, "quorum": report.quorum, "notes": list(report.notes)}}


def run_all(world: World, progress: Progress) -> dict[str, Any]:
    """Every step, in order."""
    return {"scenario": world.scenario.name, "region": world.scenario.region,
            "nodes": label_nodes(world, progress), "storage": provision(world, progress),
            "webhook": admit_static_volumes(world, progress), "workload": plan_workload(world, progress),
            "kubeApi": {"server": world.server, "patches": world.api.count("patch", "nodes")}}
