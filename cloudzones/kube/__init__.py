"""Kubernetes machinery (the adapter layer): everything that talks to an API server.

What lives here, one module each:

- `resources`: the API resources used (`Resource`, `NODES`, `PODS`, ...) and their client method names;
- `client`: `KubeClient`, the only importer of the ``kubernetes`` package; plain manifest dicts in
  and out, our `cloudzones.errors.KubeApiError` tree out of its failures, retries through
  `cloudzones.retry.RetryPolicy`;
- `watch`: the watch-event stream (`WatchStream`, `WatchEvent`) and Status-to-error mapping;
- `informer`: list + watch into a projected cache, resuming from the last resourceVersion;
- `leader`: leader election on a ``coordination.k8s.io`` Lease;
- `events`: core/v1 Events that ``kubectl describe`` shows;
- `workqueue`: the deduplicating key queue workers drain.

Nothing here knows what a zone is; the services in `cloudzones.services` wire this to the core.
The public names of both are re-exported so ``kube.KubeClient`` and ``kube.NODES`` read naturally.
"""

from cloudzones.kube.client import KubeClient
from cloudzones.kube.resources import (
    EVENTS,
    LEASES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    RESOURCES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    Resource,
)
from cloudzones.kube.watch import WatchEvent, WatchStream

__all__ = [
    "EVENTS", "LEASES", "NODES", "PERSISTENT_VOLUMES", "PERSISTENT_VOLUME_CLAIMS", "PODS", "RESOURCES",
    "STATEFUL_SETS", "STORAGE_CLASSES", "KubeClient", "Resource", "WatchEvent", "WatchStream",
]
