"""The Azure adapter: cloud config, IMDS and ARM zone detection, resource-ID parsing.

The names below are imported on first use (PEP 562): reading an IMDS document or a resource ID
must not pay for the ARM SDKs (azure-mgmt-compute alone takes about 0.3 s to import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from providers.azure.config import AzureConfig
    from providers.azure.imds import topology_from_imds
    from providers.azure.provider import AzureProvider
    from providers.azure.resource_ids import ResourceId, parse_provider_id, parse_resource_id, vmss_instance_id

_WHERE = {
    "AzureConfig": "providers.azure.config",
    "AzureProvider": "providers.azure.provider",
    "ResourceId": "providers.azure.resource_ids",
    "parse_provider_id": "providers.azure.resource_ids",
    "parse_resource_id": "providers.azure.resource_ids",
    "topology_from_imds": "providers.azure.imds",
    "vmss_instance_id": "providers.azure.resource_ids",
}

__all__ = [
    "AzureConfig",
    "AzureProvider",
    "ResourceId",
    "parse_provider_id",
    "parse_resource_id",
    "topology_from_imds",
    "vmss_instance_id",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'providers.azure' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
