"""cloudzones: zone-aware Kubernetes on Azure (and AWS, GCP).

The package root re-exports the pure core model; everything else is reached through its
module (``cloudzones.placement``, ``cloudzones.errors``, ``cloudzones.labels``, ...).
"""

from cloudzones.topology import Topology, is_availability_zone, make_zone, zone_id

__all__ = ["Topology", "is_availability_zone", "make_zone", "zone_id"]
__version__ = "0.1.0"
