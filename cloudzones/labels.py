"""Well-known label and annotation keys that cloudzones reads and writes."""

from __future__ import annotations

import re
from typing import Final

ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
BETA_ZONE: Final = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION: Final = "failure-domain.beta.kubernetes.io/region"

#: Set on unzoned Azure VMs, so a fault domain never has to masquerade as a zone
#: (cloud-provider-azure #10222 proposes the same key).
FAULT_DOMAIN: Final = "topology.kubernetes.azure.com/fault-domain"
SUB_FAULT_DOMAIN: Final = "topology.kubernetes.azure.com/sub-fault-domain"

#: The azuredisk CSI driver's own topology key.
CSI_DISK_ZONE: Final = "topology.disk.csi.azure.com/zone"

#: Nodes carrying ``kubernetes.azure.com/managed=false`` are not managed by the cloud provider.
AZURE_MANAGED: Final = "kubernetes.azure.com/managed"

ZONE_KEYS: Final = (ZONE, BETA_ZONE)
REGION_KEYS: Final = (REGION, BETA_REGION)

#: Pod annotation written by the pod zone annotator: the node's topology label values joined
#: with ``_`` in key order (``eastus-1_eastus`` for zone, region), the Loki operator's convention.
POD_ZONES: Final = "topology.cloudzones.io/zones"


_KEY: Final = re.compile(r"(?:[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")


def is_label_key(value: str) -> bool:
    """Whether ``value`` is a label key the API server accepts: an optional DNS-subdomain prefix and ``/``, then a
    name of at most 63 letters, digits, ``-``, ``_`` or ``.``, starting and ending with a letter or digit."""
    return _KEY.fullmatch(value) is not None
