"""GCP: this instance's zone from the metadata server (``instance/zone`` → ``projects/N/zones/<zone>``)."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable

from cloudzones import errors
from cloudzones.topology import Topology
from providers import metadata

# Zone names are <region>-<letter>, e.g. us-central1-a, europe-west4-b.
_ZONE = re.compile(r"projects/[^/]+/zones/(?P<zone>(?P<region>[a-z0-9]+(?:-[a-z0-9]+)*)-[a-z0-9]+)")


def topology_from_zone_path(body: str) -> Topology:
    """Parse ``projects/123/zones/us-central1-a`` into region ``us-central1`` and zone ``us-central1-a``."""
    match = _ZONE.fullmatch(body.strip())
    if not match:
        raise errors.MetadataError(f"GCP metadata zone {body.strip()[:120]!r} is not projects/<n>/zones/<zone>")
    return Topology(match["region"], match["zone"])


class GcpProvider:
    """Zone detection on GCE; the SDK lookups by node are not implemented."""

    name = "gcp"

    def __init__(self, *, metadata_url: str = "http://metadata.google.internal",
                 metadata_settings: metadata.MetadataSettings | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self._base = metadata_url.rstrip("/")
        self._client = metadata.MetadataClient(service="GCP metadata server", settings=metadata_settings,
                                               clock=clock, sleep=sleep, rand=rand)

    def __repr__(self) -> str:
        return f"GcpProvider(metadata_url={self._base!r})"

    def local_topology(self) -> Topology:
        """This instance's region and zone."""
        response = self._client.request("GET", f"{self._base}/computeMetadata/v1/instance/zone",
                                        headers={"Metadata-Flavor": "Google"})
        if response.status != 200:
            raise errors.MetadataError(f"GCP metadata server answered HTTP {response.status} for instance/zone")
        if response.headers.get("Metadata-Flavor") != "Google":
            raise errors.MetadataError("the answer did not come from a GCP metadata server (Metadata-Flavor missing)")
        return topology_from_zone_path(response.text)

    def topology_by_provider_id(self, provider_id: str, *,
                                on_busy: Callable[[], object] | None = None) -> Topology | None:
        """Not implemented: cloudzones resolves GCE nodes only from instance metadata."""
        raise NotImplementedError("GCP node lookups through the Compute API are not implemented; use node-agent mode")

    def topology_by_node_name(self, node_name: str) -> Topology:
        """Not implemented: cloudzones resolves GCE nodes only from instance metadata."""
        raise NotImplementedError("GCP node lookups through the Compute API are not implemented; use node-agent mode")
