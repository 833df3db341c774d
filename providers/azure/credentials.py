"""Build an azure-identity credential from the cloud config (the only module that imports azure-identity).

Precedence follows cloud-provider-azure: managed identity when ``useManagedIdentityExtension`` is
set, then workload identity (``AZURE_FEDERATED_TOKEN_FILE``, as the AKS webhook injects), then a
client secret. No credential at all is a configuration error, said plainly.
"""

from __future__ import annotations

from typing import Any

from azure.core.credentials import TokenCredential
from azure.identity import (
    AzureAuthorityHosts,
    ClientSecretCredential,
    ManagedIdentityCredential,
    WorkloadIdentityCredential,
)

from cloudzones import errors
from providers.azure.config import AzureConfig

_AUTHORITIES = {
    "AzurePublicCloud": AzureAuthorityHosts.AZURE_PUBLIC_CLOUD,
    "AzureChinaCloud": AzureAuthorityHosts.AZURE_CHINA,
    "AzureUSGovernmentCloud": AzureAuthorityHosts.AZURE_GOVERNMENT,
}


def credential_kind(config: AzureConfig) -> str:
    """Which credential :func:`build_credential` builds: managed-identity, workload-identity or client-secret."""
    if config.use_managed_identity_extension:
        return "managed-identity"
    if config.use_federated_workload_identity_extension and config.aad_federated_token_file:
        return "workload-identity"
    if config.aad_client_id and config.aad_client_secret:
        return "client-secret"
    raise errors.ConfigError(
        "no Azure credentials in the cloud config: set useManagedIdentityExtension, provide a workload"
        " identity (AZURE_FEDERATED_TOKEN_FILE), or aadClientId and aadClientSecret")


def build_credential(config: AzureConfig, **options: Any) -> TokenCredential:
    """The azure-identity credential for ``config``; ``options`` go to the credential (e.g. ``transport``)."""
    kind = credential_kind(config)
    authority = _AUTHORITIES[config.cloud]
    if kind == "managed-identity":
        # Managed identity talks to IMDS and ignores the authority.
        return ManagedIdentityCredential(client_id=config.user_assigned_identity_id or None, **options)
    if not config.tenant_id:
        raise errors.ConfigError(f"{kind} credentials need tenantId in the cloud config (or AZURE_TENANT_ID)")
    if kind == "workload-identity":
        if not config.aad_client_id:
            raise errors.ConfigError("workload identity needs a client id (AZURE_CLIENT_ID or aadClientId)")
        return WorkloadIdentityCredential(tenant_id=config.tenant_id, client_id=config.aad_client_id,
                                          token_file_path=config.aad_federated_token_file,
                                          authority=authority, **options)
    return ClientSecretCredential(config.tenant_id, config.aad_client_id, config.aad_client_secret,
                                  authority=authority, **options)
