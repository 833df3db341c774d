"""The cloud-provider-azure ``azure.json`` cloud config, read the way cloud-provider-azure reads it.

JSON or YAML, keys matched case-insensitively, unknown keys ignored, ``resourceGroup`` lower-cased,
defaults as upstream (``vmType: vmss``, ``loadBalancerSku: standard``, ``excludeMasterFromStandardLB: true``).
Secrets never appear in ``repr``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

from cloudzones import documents, errors, shapes
from cloudzones.topology import normalize_region

#: ``cloud`` values (upper-cased) → our cloud names; cloud-provider-azure accepts these spellings.
CLOUDS = {
    "AZUREPUBLICCLOUD": "AzurePublicCloud",
    "AZURECHINACLOUD": "AzureChinaCloud",
    "AZUREUSGOVERNMENTCLOUD": "AzureUSGovernmentCloud",
    "AZUREUSGOVERNMENT": "AzureUSGovernmentCloud",
}
VM_TYPES = ("standard", "vmss", "vmssflex")
LB_SKUS = ("basic", "standard")

_SECRET_FIELDS = frozenset({"aad_client_secret", "aad_client_cert_password"})


@dataclasses.dataclass(frozen=True)
class AzureConfig:
    """The subset of cloud-provider-azure's cloud config that cloudzones uses."""

    cloud: str = "AzurePublicCloud"
    """``AzurePublicCloud``, ``AzureChinaCloud`` or ``AzureUSGovernmentCloud``."""
    tenant_id: str = ""
    subscription_id: str = ""
    resource_group: str = ""
    """Lower-cased, as cloud-provider-azure does, so IDs compare equal whatever case ARM used."""
    location: str = ""
    """The region, normalised (lower case, no spaces)."""
    vm_type: str = "vmss"
    load_balancer_sku: str = "standard"
    exclude_master_from_standard_lb: bool = True
    vnet_name: str = ""
    """The cluster's virtual network (``vnetName``): IP-based load balancer backend pools address nodes in it."""
    vnet_resource_group: str = ""
    """The virtual network's resource group (``vnetResourceGroup``); empty means ``resource_group``."""
    use_managed_identity_extension: bool = False
    user_assigned_identity_id: str = ""
    aad_client_id: str = ""
    aad_client_secret: str = ""
    aad_client_cert_path: str = ""
    aad_client_cert_password: str = ""
    use_federated_workload_identity_extension: bool = False
    aad_federated_token_file: str = ""
    resource_manager_endpoint: str = ""
    """Overrides the cloud's ARM endpoint (Azure Stack, or a test server)."""
    vmss_cache_ttl: float = 600.0
    """Seconds a scale set's VM list stays fresh (``vmssVirtualMachinesCacheTTLInSeconds``)."""
    vm_cache_ttl: float = 60.0
    """Seconds a standalone VM stays fresh (``vmCacheTTLInSeconds``)."""

    def __repr__(self) -> str:
        shown = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _SECRET_FIELDS and value:
                value = "***"
            shown.append(f"{field.name}={value!r}")
        return f"AzureConfig({', '.join(shown)})"

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> AzureConfig:
        """Read ``azure.json`` (JSON or YAML) from ``path``."""
        found = documents.load_all(path, what="cloud config")
        if len(found) > 1:
            raise documents.InputError(f"cloud config {os.fspath(path)}: expected one document, found {len(found)}")
        data = found[0] if found else {}
        if not isinstance(data, Mapping):
            raise documents.InputError(f"cloud config {os.fspath(path)}: expected a mapping, got "
                                       f"{shapes.describe(data)}")
        return cls.from_mapping(data, environ=environ)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> AzureConfig:
        """Build from parsed ``azure.json`` content; ``environ`` supplies the workload-identity overrides."""
        raw = {str(key).lower(): value for key, value in mapping.items()}
        env = os.environ if environ is None else environ

        def text(key: str, default: str = "") -> str:
            value = raw.get(key.lower(), default)
            if value is None:
                return default
            if isinstance(value, (dict, list)):
                raise errors.ConfigError(f"cloud config key {key!r} must be a string, got {value!r}")
            return str(value).strip()

        cloud_name = text("cloud") or "AzurePublicCloud"
        cloud = CLOUDS.get(cloud_name.upper())
        if cloud is None:
            choices = sorted(set(CLOUDS.values()))
            raise errors.ConfigError(f"unsupported cloud {cloud_name!r}; expected one of {choices}")
        vm_type = (text("vmType") or "vmss").lower()
        if vm_type not in VM_TYPES:
            raise errors.ConfigError(f"unsupported vmType {vm_type!r}; expected one of {list(VM_TYPES)}")
        sku = (text("loadBalancerSku") or "standard").lower()
        if sku not in LB_SKUS:
            raise errors.ConfigError(f"unsupported loadBalancerSku {sku!r}; expected one of {list(LB_SKUS)}")
        token_file = env.get("AZURE_FEDERATED_TOKEN_FILE", "") or text("aadFederatedTokenFile")
        return cls(
            cloud=cloud,
            tenant_id=env.get("AZURE_TENANT_ID", "") or text("tenantId"),
            subscription_id=text("subscriptionId"),
            resource_group=text("resourceGroup").lower(),
            location=normalize_region(text("location")),
            vm_type=vm_type,
            load_balancer_sku=sku,
            exclude_master_from_standard_lb=_flag(raw, "excludeMasterFromStandardLB", True),
            vnet_name=text("vnetName"),
            vnet_resource_group=text("vnetResourceGroup"),
            use_managed_identity_extension=_flag(raw, "useManagedIdentityExtension", False),
            user_assigned_identity_id=text("userAssignedIdentityID"),
            aad_client_id=(env.get("AZURE_CLIENT_ID", "") if token_file else "") or text("aadClientId"),
            aad_client_secret=text("aadClientSecret"),
            aad_client_cert_path=text("aadClientCertPath"),
            aad_client_cert_password=text("aadClientCertPassword"),
            use_federated_workload_identity_extension=bool(token_file)
            or _flag(raw, "useFederatedWorkloadIdentityExtension", False),
            aad_federated_token_file=token_file,
            resource_manager_endpoint=text("resourceManagerEndpoint"),
            vmss_cache_ttl=_seconds(raw, "vmssVirtualMachinesCacheTTLInSeconds", 600.0),
            vm_cache_ttl=_seconds(raw, "vmCacheTTLInSeconds", 60.0),
        )


def _flag(raw: Mapping[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key.lower())
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise errors.ConfigError(f"cloud config key {key!r} must be true or false, got {value!r}")


def _seconds(raw: Mapping[str, Any], key: str, default: float) -> float:
    value = raw.get(key.lower())
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0 or isinstance(value, bool):  # "nan" and "inf" read as floats
        raise errors.ConfigError(f"cloud config key {key!r} must be a non-negative number of seconds, got {value!r}")
    return seconds
