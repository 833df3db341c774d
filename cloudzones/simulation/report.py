"""Turn a simulation's results into the checklist of invariants and the tables ``simulate`` prints."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from cloudzones import is_availability_zone, labels
from cloudzones.cli import output
from cloudzones.placement import selectors


def checks(result: Mapping[str, Any], node_labels: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """Every invariant with whether it holds and, when it does not, what broke it."""
    region = result["region"]
    nodes, storage, webhook, workload = result["nodes"], result["storage"], result["webhook"], result["workload"]
    found: list[dict[str, Any]] = []

    def check(name: str, failures: list[str]) -> None:
        found.append({"check": name, "ok": not failures, "detail": "; ".join(failures[:5])})

    check("every zoned node is labelled <region>-<n> with its ARM zone",
          [f"{r['node']}: {r['zone']!r} != {r['expected']!r}" for r in nodes["rows"] if r["zone"] != r["expected"]])
    counted = [f"disk zone {r['zone']}" for r in storage["rows"] if r["ok"] and r.get("zone")
               and not is_availability_zone(r["zone"], region)]
    counted += [f"workload zone {z}" for z in ((workload or {}).get("perZone") or {})
                if not is_availability_zone(z, region)]
    check("no fault domain is counted as a zone (disks, workload spread)", counted)
    check("unzoned nodes carry their fault domain, zoned ones do not",
          [r["node"] for r in nodes["rows"] if bool(r["faultDomain"]) == r["availabilityZone"]])
    check("node agents (IMDS) agree with the controller (ARM)",
          [f"{r['node']}: {r['nodeAgent']}" for r in nodes["rows"] if r["nodeAgent"] != "unchanged"])
    check(f"ARM calls to label nodes within budget ({nodes['armCalls']} <= {nodes['armBudget']})",
          [] if nodes["armCalls"] <= nodes["armBudget"] else [f"{nodes['armCalls']} calls"])
    ok_rows = [r for r in storage["rows"] if r["ok"]]
    mismatched = []
    for row in ok_rows:
        disk_zone = f"{region}-{row['diskZones'][0]}" if row["diskZones"] else None
        affinity = selectors.volume_node_affinity(row["affinity"])
        attachable = [n for n, lbl in node_labels.items() if affinity.matches(n, lbl)]
        wrong = [n for n in attachable if disk_zone and node_labels[n].get(labels.ZONE) != disk_zone]
        if not attachable or wrong:
            mismatched.append(f"{row['claim']}: attachable {attachable[:3]}, wrong {wrong[:3]}")
        if not disk_zone and not row["sku"].endswith("_ZRS"):
            mismatched += [f"{row['claim']}: admits zoned node {n}" for n in attachable
                           if is_availability_zone(node_labels[n].get(labels.ZONE, ""), region)]
    check("every PV's node affinity admits exactly the nodes its disk can attach to", mismatched)
    check("claims fail exactly where the scenario expects, naming the rule",
          [f"{r['claim']}: {'failed' if not r['ok'] else 'succeeded'}" for r in storage["rows"]
           if r["ok"] == r["expectError"]])
    check("provisioning a claim again creates no second disk",
          [] if storage["secondRunPuts"] == 0 else [f"{storage['secondRunPuts']} extra PUT(s)"])
    by_set: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for row in ok_rows:
        if row["statefulSet"]:
            by_set[row["statefulSet"]].append((row["ordinal"], row["zone"]))
    check("consecutive StatefulSet ordinals land in different zones",
          [f"{sts} {a[0]}/{b[0]} in {a[1]}" for sts, ords in by_set.items()
           for a, b in zip(sorted(ords), sorted(ords)[1:], strict=False) if a[1] == b[1]])
    firsts = collections.Counter(zone for ords in by_set.values() for ordinal, zone in ords if ordinal == 0)
    check("StatefulSets sharing a last name token do not all start in one zone",
          [] if len(by_set) < 2 or len(firsts) > 1 else [f"all first volumes in {list(firsts)}"])
    check("the webhook labels Azure PVs and leaves others alone",
          [r["volume"] for r in webhook["rows"] if r["patched"] != r["azure"] or not r["allowed"]])
    if workload is not None:
        per_zone = workload.get("perZone") or {}
        skew = (max(per_zone.values()) - min(per_zone.values())) if per_zone else 0
        problems = [workload["error"]] if "error" in workload else []
        if skew > workload.get("maxSkew", 1):
            problems.append(f"skew {skew}")
        if "tolerance" in workload and workload["tolerance"]["writeZoneFailures"] < 1:
            problems.append("losing one zone stops writes")
        check("the workload plan respects maxSkew and survives losing one zone", problems)
        if "plan" in workload and "error" not in workload:
            zone_of_pod = {p["pod"]: p["zone"] for p in workload["plan"]}
            check("every workload pod is annotated with its node's zone",
                  [pod for pod, zone in zone_of_pod.items()
                   if (workload.get("podAnnotations") or {}).get(pod, {}).get(labels.ZONE) != zone])
    return found


def tables(result: Mapping[str, Any], found: list[dict[str, Any]]) -> str:
    """The human-readable report."""
    parts = [f"scenario {result['scenario']} in {result['region']} on {result['kubeApi']['server']}\n", "\nNODES\n",
             output.table(result["nodes"]["rows"], ["node", "kind", "group", "zone", "faultDomain", "availabilityZone",
                                                    "nodeAgent"])]
    claims = [{**r, "zone": r.get("zone") or ("-" if r["ok"] else "ERROR"), "rule": r.get("rule", ""),
               "disk": r.get("disk", r.get("error", ""))[:70]} for r in result["storage"]["rows"]]
    parts += ["\nCLAIMS\n", output.table(claims, ["claim", "storageClass", "zone", "rule", "disk"])]
    balance: dict[str, dict[str, int]] = collections.defaultdict(lambda: {"nodes": 0, "disks": 0, "replicas": 0})
    for row in result["nodes"]["rows"]:
        balance[row["zone"]]["nodes"] += 1
    for row in result["storage"]["rows"]:
        if row["ok"] and row.get("zone"):
            balance[row["zone"]]["disks"] += 1
    workload = result["workload"]
    for zone, count in ((workload or {}).get("perZone") or {}).items():
        balance[zone]["replicas"] += count
    rows = [{"zone": z if is_availability_zone(z, result["region"]) else f"{z} (fault domain)", **v}
            for z, v in sorted(balance.items())]
    parts += ["\nZONE BALANCE\n", output.table(rows,
                                               ["zone", "nodes", "disks", "replicas"])]
    parts += ["\nWEBHOOK\n", output.table(result["webhook"]["rows"], ["volume", "azure", "patched", "labels"])]
    if workload is not None:
        tolerance = workload.get("tolerance") or {}
        parts += [f"\nWORKLOAD {workload['name']}: {len(workload.get('plan') or [])} replicas, per zone "
                  f"{workload.get('perZone')}, rf {workload.get('replicationFactor')}: survives "
                  f"{tolerance.get('writeZoneFailures', 0)} zone loss(es) for writes, "
                  f"{tolerance.get('readZoneFailures', 0)} for reads\n"]
    parts += ["\nCHECKS\n"] + [f"  [{'ok' if c['ok'] else 'FAIL'}] {c['check']}" + (f": {c['detail']}" if c["detail"]
                                                                                    else "") + "\n" for c in found]
    return "".join(parts)
