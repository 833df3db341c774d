"""Tests for reading azure.json and building credentials from it."""

from __future__ import annotations

import logging
import pathlib

import pytest
from azure.identity import ClientSecretCredential, ManagedIdentityCredential, WorkloadIdentityCredential

from cloudzones import errors
from providers.azure import AzureConfig
from providers.azure.credentials import build_credential, credential_kind

SECRET = "s3cr3t-value-that-must-not-leak"


class TestAzureConfig:
    """AzureConfig parses cloud-provider-azure's config the way upstream does."""

    def test_defaults(self) -> None:
        """Upstream defaults: vmss, standard LB, exclude masters."""
        config = AzureConfig.from_mapping({}, environ={})
        assert (config.vm_type, config.load_balancer_sku, config.exclude_master_from_standard_lb) == (
            "vmss", "standard", True)
        assert config.cloud == "AzurePublicCloud"

    def test_odd_key_case_and_unknown_keys(self) -> None:
        """Keys match case-insensitively; unknown keys are ignored; resourceGroup is lower-cased."""
        config = AzureConfig.from_mapping({
            "CLOUD": "azurechinacloud", "TenantID": "t", "subscriptionid": "sub", "ResourceGroup": "My-RG",
            "Location": "ChinaNorth2", "VMTYPE": "standard", "loadbalancersku": "Basic",
            "excludeMasterFromStandardLb": "false", "cloudProviderRatelimit": True, "vmssVirtualMachinesCacheTTLInSeconds": 30,
        }, environ={})
        assert config.cloud == "AzureChinaCloud"
        assert (config.resource_group, config.location, config.vm_type, config.load_balancer_sku) == (
            "my-rg", "chinanorth2", "standard", "basic")
        assert config.exclude_master_from_standard_lb is False
        assert config.vmss_cache_ttl == 30

    def test_yaml_file(self, tmp_path: pathlib.Path) -> None:
        """A YAML cloud config loads like JSON."""
        path = tmp_path / "azure.yaml"
        path.write_text("cloud: AzureUSGovernmentCloud\nresourceGroup: RG1\nlocation: usgovvirginia\n"
                        "useManagedIdentityExtension: true\nuserAssignedIdentityID: abc\n")
        config = AzureConfig.load(path, environ={})
        assert (config.cloud, config.resource_group, config.use_managed_identity_extension,
                config.user_assigned_identity_id) == ("AzureUSGovernmentCloud", "rg1", True, "abc")

    def test_json_file_with_trailing_comma_falls_back_to_yaml(self, tmp_path: pathlib.Path) -> None:
        """Files that are almost JSON still load through the YAML parser."""
        path = tmp_path / "azure.json"
        path.write_text('{"resourceGroup": "rg", "vmType": vmss}')
        assert AzureConfig.load(path, environ={}).vm_type == "vmss"

    @pytest.mark.parametrize(("mapping", "needle"), [
        ({"cloud": "AzureGermanCloud"}, "AzureGermanCloud"), ({"vmType": "scaleset"}, "scaleset"),
        ({"loadBalancerSku": "premium"}, "premium"), ({"useManagedIdentityExtension": "yes"}, "yes"),
        ({"vmCacheTTLInSeconds": -5}, "-5"), ({"resourceGroup": ["a"]}, "['a']"),
        ({"vmCacheTTLInSeconds": "nan"}, "'nan'"), ({"vmssVirtualMachinesCacheTTLInSeconds": "inf"}, "'inf'"),
        ({"vmCacheTTLInSeconds": "1" + "0" * 400}, "must be a non-negative number of seconds"),
    ])
    def test_invalid_values_named(self, mapping: dict[str, object], needle: str) -> None:
        """Bad values raise ConfigError naming the value."""
        with pytest.raises(errors.ConfigError) as info:
            AzureConfig.from_mapping(mapping, environ={})
        assert needle in str(info.value)

    def test_missing_file(self, tmp_path: pathlib.Path) -> None:
        """A missing file is a ConfigError with the path."""
        with pytest.raises(errors.ConfigError, match="nope.json"):
            AzureConfig.load(tmp_path / "nope.json")

    def test_secret_not_in_repr_or_logs(self, caplog: pytest.LogCaptureFixture) -> None:
        """repr masks the client secret, so logging the config cannot leak it."""
        config = AzureConfig.from_mapping({"aadClientId": "id", "aadClientSecret": SECRET}, environ={})
        caplog.set_level(logging.DEBUG)
        logging.getLogger("test").debug("config %r %s", config, config)
        assert SECRET not in repr(config) and SECRET not in caplog.text
        assert "***" in repr(config)
        assert config.aad_client_secret == SECRET

    def test_workload_identity_from_environment(self) -> None:
        """AZURE_FEDERATED_TOKEN_FILE switches on workload identity with the env's tenant and client."""
        config = AzureConfig.from_mapping({"tenantId": "cfg-tenant"}, environ={
            "AZURE_FEDERATED_TOKEN_FILE": "/var/run/token", "AZURE_CLIENT_ID": "cid", "AZURE_TENANT_ID": "tid"})
        assert config.use_federated_workload_identity_extension
        assert (config.tenant_id, config.aad_client_id, config.aad_federated_token_file) == ("tid", "cid", "/var/run/token")


class TestCredentials:
    """build_credential picks the azure-identity credential the config asks for."""

    def test_managed_identity_user_assigned(self) -> None:
        """useManagedIdentityExtension wins and passes the user-assigned client id."""
        config = AzureConfig.from_mapping({"useManagedIdentityExtension": True, "userAssignedIdentityID": "uai",
                                           "aadClientId": "x", "aadClientSecret": "y"}, environ={})
        assert credential_kind(config) == "managed-identity"
        assert isinstance(build_credential(config), ManagedIdentityCredential)

    def test_workload_identity(self, tmp_path: pathlib.Path) -> None:
        """A federated token file gives a WorkloadIdentityCredential."""
        token = tmp_path / "token"
        token.write_text("jwt")
        config = AzureConfig.from_mapping({}, environ={"AZURE_FEDERATED_TOKEN_FILE": str(token),
                                                       "AZURE_CLIENT_ID": "cid", "AZURE_TENANT_ID": "tid"})
        assert isinstance(build_credential(config), WorkloadIdentityCredential)

    def test_client_secret(self) -> None:
        """aadClientId and aadClientSecret give a ClientSecretCredential."""
        config = AzureConfig.from_mapping({"tenantId": "t", "aadClientId": "c", "aadClientSecret": SECRET}, environ={})
        credential = build_credential(config)
        assert isinstance(credential, ClientSecretCredential)
        assert SECRET not in repr(credential)

    def test_no_credentials(self) -> None:
        """No way to authenticate is a plain ConfigError."""
        with pytest.raises(errors.ConfigError, match="no Azure credentials"):
            build_credential(AzureConfig.from_mapping({"tenantId": "t"}, environ={}))

    def test_secret_needs_tenant(self) -> None:
        """A client secret without a tenant is refused before any network call."""
        with pytest.raises(errors.ConfigError, match="tenantId"):
            build_credential(AzureConfig.from_mapping({"aadClientId": "c", "aadClientSecret": "s"}, environ={}))

