"""The Azure adapter: cloud config, IMDS and ARM zone detection, resource-ID parsing."""

from providers.azure.config import AzureConfig
from providers.azure.imds import topology_from_imds
from providers.azure.provider import AzureProvider
from providers.azure.resource_ids import ResourceId, parse_provider_id, parse_resource_id, vmss_instance_id

__all__ = [
    "AzureConfig",
    "AzureProvider",
    "ResourceId",
    "parse_provider_id",
    "parse_resource_id",
    "topology_from_imds",
    "vmss_instance_id",
]
