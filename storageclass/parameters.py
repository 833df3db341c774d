"""The Azure disk StorageClass parameters we accept, and how their values are normalised.

Names follow the in-tree ``kubernetes.io/azure-disk`` provisioner and the azuredisk CSI driver;
both compare parameter names case-insensitively, and so do we.
"""

from __future__ import annotations

from typing import Final

#: Every parameter name (lower case) of the in-tree provisioner and the azuredisk CSI driver.
KNOWN: Final = frozenset({
    # in-tree kubernetes.io/azure-disk
    "skuname", "storageaccounttype", "location", "storageaccount", "kind", "cachingmode", "fstype",
    "resourcegroup", "zone", "zones", "zoned", "diskiopsreadwrite", "diskmbpsreadwrite",
    "diskencryptionsetid",
    # disk.csi.azure.com
    "subscriptionid", "logicalsectorsize", "diskname", "diskencryptiontype", "tags", "maxshares",
    "perfprofile", "networkaccesspolicy", "publicnetworkaccess", "diskaccessid", "enablebursting",
    "useragent", "enableasyncattach", "enableperformanceplus", "attachdiskinitialdelay",
    "tagvaluedelimiter", "writeacceleratorenabled", "csi-migration",
})
#: Prefixes of parameter families the CSI sidecars and driver define.
KNOWN_PREFIXES: Final = ("csi.storage.k8s.io/", "device-setting/")

DEFAULT_SKU: Final = "Premium_LRS"
#: Managed disk SKUs, spelled as ARM spells them.
SKUS: Final = ("Premium_LRS", "PremiumV2_LRS", "Premium_ZRS", "Standard_LRS", "StandardSSD_LRS",
               "StandardSSD_ZRS", "UltraSSD_LRS")
#: Zone-redundant SKUs: the disk has no zone and attaches from every zone of its region.
ZONE_REDUNDANT_SKUS: Final = frozenset({"Premium_ZRS", "StandardSSD_ZRS"})
#: SKUs whose disks support no host caching.
UNCACHED_SKUS: Final = frozenset({"PremiumV2_LRS", "UltraSSD_LRS"})

#: Disk kinds (``kind`` parameter) as the PV's ``azureDisk.kind`` spells them.
KINDS: Final = ("Managed", "Shared", "Dedicated")
MANAGED: Final = "Managed"

CACHING_MODES: Final = ("None", "ReadOnly", "ReadWrite")
DEFAULT_CACHING_MODE: Final = "ReadOnly"

DEFAULT_FS_TYPE: Final = "ext4"

BINDING_MODES: Final = ("Immediate", "WaitForFirstConsumer")
WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
RECLAIM_POLICIES: Final = ("Delete", "Retain")

#: The provisioner names whose StorageClasses these rules describe.
IN_TREE_PROVISIONER: Final = "kubernetes.io/azure-disk"
CSI_PROVISIONER: Final = "disk.csi.azure.com"
CLOUDZONES_PROVISIONER: Final = "cloudzones.io/azure-disk"
"""The default name of ``cloudzones provisioner``."""
AZURE_DISK_PROVISIONERS: Final = frozenset({IN_TREE_PROVISIONER, CSI_PROVISIONER, CLOUDZONES_PROVISIONER})


def is_known(name: str) -> bool:
    """Whether ``name`` (any case) is a parameter the in-tree provisioner or the CSI driver defines."""
    lowered = name.lower()
    return lowered in KNOWN or lowered.startswith(KNOWN_PREFIXES)


def canonical(value: str, choices: tuple[str, ...]) -> str | None:
    """The member of ``choices`` equal to ``value`` ignoring case, or None."""
    lowered = value.lower()
    return next((choice for choice in choices if choice.lower() == lowered), None)
