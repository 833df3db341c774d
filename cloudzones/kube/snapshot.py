"""Read the live cluster into the snapshot the planners take (`cloudzones.workloads.outage`'s shape).

Read-only and paged: nodes and PersistentVolumes cluster-wide; pods, claims and StatefulSets in one
namespace or all; FoundationDBClusters, LokiStacks and Longhorn's volumes, replicas, nodes and settings
through the dynamic API, each skipped with a note when its CRD is not installed. Pods are reduced on
arrival to what the planners read, so that 150,000 of them stay a few hundred MB rather than several GB.
"""

from __future__ import annotations

from typing import Any

from cloudzones import errors, kube
from cloudzones.workloads import compact, locality

#: The custom resources `cloudzones plan` reads one of, by kind: (group, version, plural).
WORKLOADS = {"LokiStack": ("loki.grafana.com", "v1", "lokistacks"),
             "FoundationDBCluster": ("apps.foundationdb.org", "v1beta2", "foundationdbclusters")}

#: Custom resources the planners read: snapshot key → (group, version, plural, kind).
CUSTOM = {"foundationDBClusters": ("apps.foundationdb.org", "v1beta2", "foundationdbclusters", "FoundationDBCluster"),
          "lokiStacks": ("loki.grafana.com", "v1", "lokistacks", "LokiStack"),
          "longhornVolumes": ("longhorn.io", "v1beta2", "volumes", "Volume"),
          "longhornReplicas": ("longhorn.io", "v1beta2", "replicas", "Replica"),
          "longhornNodes": ("longhorn.io", "v1beta2", "nodes", "Node"),
          "longhornSettings": ("longhorn.io", "v1beta2", "settings", "Setting")}


def read(client: kube.KubeClient, *, namespace: str | None = None,
         page_size: int = 500) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The snapshot of the cluster (``namespace`` None: all namespaces) and notes on what was skipped.

    Every object is checked as a snapshot file's are (`compact.SnapshotItems`): what an API server
    answers is input too, and a wrong type is one line naming the list and the item.
    """
    notes: list[str] = []
    each = compact.SnapshotItems()  # pods compacted on arrival, their repeated parts kept once
    pods: list[dict[str, Any]] = []
    for page in client.list_pages(kube.PODS, namespace=namespace, page_size=page_size):
        pods += _checked(page.get("items") or [], "pods", "list of pods", each, offset=len(pods))
    snapshot: dict[str, list[dict[str, Any]]] = {
        "nodes": _items(client, kube.NODES, None, page_size),
        "pods": pods,
        "persistentVolumeClaims": _items(client, kube.PERSISTENT_VOLUME_CLAIMS, namespace, page_size),
        "persistentVolumes": _items(client, kube.PERSISTENT_VOLUMES, None, page_size),
        "statefulSets": _items(client, kube.STATEFUL_SETS, namespace, page_size),
    }
    for key, (group, version, plural, kind) in CUSTOM.items():
        try:
            found = client.list_custom(group, version, plural, namespace=namespace, page_size=page_size)
        except errors.KubeNotFound:
            notes.append(f"{kind} ({plural}.{group}/{version}) is not installed in this cluster: skipped")
            found = []
        except errors.KubeApiError as exc:
            if exc.status != 403:
                raise
            # An optional input: a reader without the right still gets the rest of the report.
            notes.append(f"{kind} ({plural}.{group}/{version}): not allowed to list them: skipped")
            found = []
        found = _checked(found, key, f"list of {plural}.{group}", each)
        snapshot[key] = [{"apiVersion": f"{group}/{version}", "kind": kind, **o} for o in found]
    return snapshot, notes


_KEYS = {kube.NODES.kind: "nodes", kube.PERSISTENT_VOLUME_CLAIMS.kind: "persistentVolumeClaims",
         kube.PERSISTENT_VOLUMES.kind: "persistentVolumes", kube.STATEFUL_SETS.kind: "statefulSets"}
"""The snapshot key of each built-in kind listed here (which schema its items are checked against)."""


def _checked(items: list[Any], key: str, what: str, each: compact.SnapshotItems, *, offset: int = 0) -> list[Any]:
    """``items`` through ``each`` under snapshot key ``key``; a wrong type is a `ShapeError` naming ``what``."""
    return [each(item, f"{what}: items[{offset + index}]", key) for index, item in enumerate(items)]


def _items(client: kube.KubeClient, resource: kube.Resource, namespace: str | None,
           page_size: int) -> list[dict[str, Any]]:
    kind = resource.kind
    api_version = "apps/v1" if resource.api == "AppsV1Api" else "v1"
    items = client.list(resource, namespace=namespace, page_size=page_size).get("items") or []
    # Only pods keep state in SnapshotItems (their shared parts): a fresh one for other kinds costs nothing.
    items = _checked(items, _KEYS[kind], f"list of {resource.plural}", compact.SnapshotItems())
    for item in items:
        item.setdefault("kind", kind)
        item.setdefault("apiVersion", api_version)
    return items


def read_workload(client: kube.KubeClient, kind: str, name: str,
                  namespace: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One LokiStack or FoundationDBCluster by name, and every node (what `cloudzones plan` reads with it)."""
    group, version, plural = WORKLOADS[kind]
    try:
        found = client.get_custom(group, version, plural, name, namespace=namespace)
    except errors.KubeNotFound as exc:
        raise errors.ConfigError(f"no {kind} {namespace}/{name} in this cluster (or its CRD {plural}.{group} is "
                                 f"not installed): {exc}") from None
    found.setdefault("kind", kind)
    return found, _items(client, kube.NODES, None, 500)


def read_longhorn(client: kube.KubeClient, *, namespace: str, storage_class: str | None) -> dict[str, Any]:
    """Longhorn's volumes, replicas, nodes and settings in ``namespace``, the StorageClass named, and every node."""
    parts: dict[str, Any] = {}
    for key, (group, version, plural, _) in CUSTOM.items():
        if group != "longhorn.io":
            continue
        try:
            listed = client.list_custom(group, version, plural, namespace=namespace)
        except errors.KubeNotFound as exc:
            raise errors.ConfigError(f"Longhorn's {plural}.{group}/{version} is not installed in this cluster: "
                                     f"{exc}") from None
        parts[plural] = _checked(listed, key, f"list of {plural}.{group}", compact.SnapshotItems())
    settings = locality.settings_of(parts.pop("settings"))
    found = None
    if storage_class:
        try:
            found = client.get(kube.STORAGE_CLASSES, storage_class)
        except errors.KubeNotFound:
            raise errors.ConfigError(f"no StorageClass {storage_class!r} in this cluster") from None
    return {**parts, "settings": settings, "storageClass": found,
            "kubeNodes": _items(client, kube.NODES, None, 500)}
