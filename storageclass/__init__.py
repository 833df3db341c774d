"""StorageClass rules for zoned Azure managed disks: validation, zone choice, and PV topology (pure).

``StorageClassSpec.from_manifest`` checks a class; ``select_zones`` / ``explain_zones`` pick the
disk's zone (and say which rule decided); ``volume_topology`` gives the PV's labels and node
affinity; ``choose_zones`` is Kubernetes' own round-robin, bit for bit.
"""

from storageclass.provisioner import Provisioner
from storageclass.rules import Rule
from storageclass.spec import StorageClassSpec
from storageclass.topology import volume_topology
from storageclass.zones import MODES, ZoneChoice, choose_zones, explain_zones, select_zones

__all__ = [
    "MODES",
    "Provisioner",
    "Rule",
    "StorageClassSpec",
    "ZoneChoice",
    "choose_zones",
    "explain_zones",
    "select_zones",
    "volume_topology",
]
