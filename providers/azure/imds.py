"""Azure Instance Metadata Service: fetch ``/metadata/instance`` and turn it into a `Topology`.

`topology_from_imds` is the pure part and follows cloud-provider-azure's ``GetZone``: a zoned VM
gets ``<lower(location)>-<int(zone)>``; an unzoned one (``zone`` empty, or absent before
api-version 2017-12-01) gets its ``platformFaultDomain``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cloudzones import documents, errors
from cloudzones.topology import Topology, make_zone, normalize_region
from providers import metadata

API_VERSION = "2021-10-01"
"""cloud-provider-azure's pinned version: it has ``zone``, ``platformFaultDomain`` and ``platformSubFaultDomain``."""
DEFAULT_URL = "http://169.254.169.254"
_REGION = re.compile(r"[a-z][a-z0-9]{1,39}")
"""An Azure location once normalised: ``eastus``, ``usgovvirginia``, ``eastus2euap``."""
_DOMAIN = re.compile(r"[0-9]{1,4}")


def _compute(document: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(document, Mapping):
        raise errors.MetadataError(f"instance metadata must be a JSON object, got {type(document).__name__}")
    if "compute" in document:
        compute = document["compute"]
    elif "location" in document:
        compute = document  # already the /metadata/instance/compute part
    else:
        raise errors.MetadataError(
            f"instance metadata has no compute section (keys: {sorted(map(str, document))[:8]})")
    if not isinstance(compute, Mapping):
        raise errors.MetadataError(f"instance metadata compute section is not an object: {compute!r:.80}")
    return compute


def _text(compute: Mapping[str, Any], key: str) -> str:
    value = compute.get(key)
    if value is None:
        return ""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value).strip()
    raise errors.MetadataError(f"instance metadata field {key!r} is not a string: {value!r:.80}")


def topology_from_imds(document: Mapping[str, Any]) -> Topology:
    """The topology in a ``/metadata/instance`` body (or its ``compute`` part)."""
    compute = _compute(document)
    location = compute.get("location")
    if location is None or location == "":
        raise errors.MetadataError("instance metadata has no compute.location, so the region is unknown")
    if not isinstance(location, str):
        raise errors.MetadataError(f"instance metadata compute.location must be a region name, got {location!r:.80}")
    region = normalize_region(location)
    if not _REGION.fullmatch(region):
        raise errors.MetadataError(f"instance metadata compute.location {location!r:.80} is not an Azure region name")
    zone = compute.get("zone")
    fault_domain = _text(compute, "platformFaultDomain").lower() or None
    sub_fault_domain = _text(compute, "platformSubFaultDomain") or None
    for key, value in (("platformFaultDomain", fault_domain), ("platformSubFaultDomain", sub_fault_domain)):
        if value is not None and not _DOMAIN.fullmatch(value):
            raise errors.MetadataError(f"instance metadata compute.{key} must be a whole number, got {value!r:.80}")
    if zone is not None and not isinstance(zone, str):
        raise errors.InvalidZone(f"instance metadata zone must be a string of digits, got {zone!r:.40}")
    if zone:
        try:
            label = make_zone(region, zone)
        except errors.InvalidZone as exc:
            raise errors.InvalidZone(f"instance metadata zone {zone!r:.40} is not an integer zone id") from exc
    elif fault_domain is not None:
        label = fault_domain
    else:
        raise errors.MetadataError("instance metadata has neither a zone nor a platformFaultDomain")
    return Topology(region, label, fault_domain, sub_fault_domain=sub_fault_domain)


def fetch_instance_metadata(client: metadata.MetadataClient, *, imds_url: str = DEFAULT_URL) -> dict[str, Any]:
    """GET ``/metadata/instance`` through ``client`` (proxy-free, bounded) and decode it."""
    url = f"{imds_url.rstrip('/')}/metadata/instance?api-version={API_VERSION}&format=json"
    response = client.request("GET", url, headers={"Metadata": "true"})
    if response.status != 200:
        raise errors.MetadataError(
            f"Azure IMDS refused the request with HTTP {response.status}: {_error_text(response.text)}")
    try:
        body = documents.peer_json(response.text)
    except documents.NestedTooDeeply:
        raise errors.MetadataError("Azure IMDS returned JSON nested too deeply to read") from None
    except ValueError as exc:
        raise errors.MetadataError(f"Azure IMDS returned invalid JSON: {response.text[:80]!r}") from exc
    if not isinstance(body, dict):
        raise errors.MetadataError(f"Azure IMDS returned {type(body).__name__}, not an object")
    return body


def _error_text(text: str) -> str:
    try:
        body = documents.peer_json(text)
    except ValueError:
        return text[:200] or "(empty body)"
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    return text[:200]
