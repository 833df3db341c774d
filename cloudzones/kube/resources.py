"""The API resources cloudzones reads and writes, and the names of the client methods that reach each.

Part of the `cloudzones.kube` adapter (which re-exports these names); plain data, no client import.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Resource:
    """A resource kind and the names of the client methods that reach it."""

    plural: str
    kind: str
    api: str
    """The client API class (``CoreV1Api``)."""
    method: str
    """The suffix of its method names: ``node`` for ``read_node``, ``namespaced_pod`` for ``read_namespaced_pod``."""
    namespaced: bool = False

    @property
    def _all_namespaces(self) -> str:
        return self.method.removeprefix("namespaced_") + "_for_all_namespaces"


NODES = Resource("nodes", "Node", "CoreV1Api", "node")
PERSISTENT_VOLUMES = Resource("persistentvolumes", "PersistentVolume", "CoreV1Api", "persistent_volume")
PERSISTENT_VOLUME_CLAIMS = Resource("persistentvolumeclaims", "PersistentVolumeClaim", "CoreV1Api",
                                    "namespaced_persistent_volume_claim", namespaced=True)
PODS = Resource("pods", "Pod", "CoreV1Api", "namespaced_pod", namespaced=True)
EVENTS = Resource("events", "Event", "CoreV1Api", "namespaced_event", namespaced=True)
STORAGE_CLASSES = Resource("storageclasses", "StorageClass", "StorageV1Api", "storage_class")
LEASES = Resource("leases", "Lease", "CoordinationV1Api", "namespaced_lease", namespaced=True)
STATEFUL_SETS = Resource("statefulsets", "StatefulSet", "AppsV1Api", "namespaced_stateful_set", namespaced=True)
RESOURCES = {r.plural: r for r in (NODES, PERSISTENT_VOLUMES, PERSISTENT_VOLUME_CLAIMS, PODS, EVENTS,
                                   STORAGE_CLASSES, LEASES, STATEFUL_SETS)}
"""Every resource the adapter knows, by plural name."""
