"""AWS: this instance's zone from IMDSv2 (token first, then placement), through the proxy-free metadata client.

The region is read from ``placement/region``, never derived from the zone name: Local Zones such
as ``us-west-2-lax-1a`` break the "strip the last letter" trick botocore uses.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable

from cloudzones import errors
from cloudzones.topology import Topology
from providers import metadata

TOKEN_TTL_SECONDS = 21600
_TOKEN = re.compile(r"[A-Za-z0-9+/=_.-]{1,512}")
"""What an IMDSv2 session token looks like (base64 text); it is sent back in a header, so nothing else."""
_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
"""Region and zone names (``us-west-2``, ``us-west-2b``, ``us-west-2-lax-1a``): label-safe by construction."""


class AwsProvider:
    """Zone detection on EC2; the SDK lookups by node are not implemented."""

    name = "aws"

    def __init__(self, *, imds_url: str = "http://169.254.169.254",
                 metadata_settings: metadata.MetadataSettings | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self._base = imds_url.rstrip("/")
        self._client = metadata.MetadataClient(service="AWS IMDS", settings=metadata_settings, clock=clock,
                                               sleep=sleep, rand=rand)
        self._token: str | None = None

    def __repr__(self) -> str:
        # The session token is a credential of sorts: never show it.
        return f"AwsProvider(imds_url={self._base!r})"

    def _fetch_token(self) -> str:
        response = self._client.request("PUT", f"{self._base}/latest/api/token",
                                        headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_SECONDS)})
        if response.status == 403:
            raise errors.MetadataError("AWS IMDS refused a session token (HTTP 403): IMDS is turned off for this"
                                       " instance or the request was not allowed")
        token = response.text.strip()
        if response.status != 200 or not token:
            raise errors.MetadataError(f"AWS IMDS did not issue a session token (HTTP {response.status})")
        if not _TOKEN.fullmatch(token):
            # Not shown: it may be a credential, and is not text we could send back in a header anyway.
            raise errors.MetadataError("AWS IMDS issued a session token that is not token text")
        return token

    def _get(self, path: str) -> str:
        if self._token is None:
            self._token = self._fetch_token()
        for attempt in (1, 2):
            response = self._client.request("GET", f"{self._base}/latest/meta-data/{path}",
                                            headers={"X-aws-ec2-metadata-token": self._token})
            if response.status == 401 and attempt == 1:
                # The token expired or was revoked: AWS says to get a new one.
                self._token = self._fetch_token()
                continue
            if response.status == 403:
                raise errors.MetadataError(f"AWS IMDS refused {path} (HTTP 403): IMDS is turned off or disallowed")
            if response.status != 200:
                raise errors.MetadataError(f"AWS IMDS answered HTTP {response.status} for {path}")
            value = response.text.strip()
            if not value:
                raise errors.MetadataError(f"AWS IMDS returned an empty {path}")
            return value
        raise errors.MetadataError(f"AWS IMDS rejected a fresh session token for {path} (HTTP 401)")

    def local_topology(self) -> Topology:
        """This instance's region and availability zone (``us-west-2`` / ``us-west-2b``)."""
        zone = self._get("placement/availability-zone")
        region = self._get("placement/region")
        for what, value in (("zone", zone), ("region", region)):
            if len(value) > 63 or not _NAME.fullmatch(value):
                raise errors.MetadataError(f"AWS IMDS {what} {value[:80]!r} is not a {what} name")
        if not zone.startswith(region):
            raise errors.MetadataError(f"AWS IMDS zone {zone!r} is not in region {region!r}")
        return Topology(region, zone)

    def topology_by_provider_id(self, provider_id: str, *,
                                on_busy: Callable[[], object] | None = None) -> Topology | None:
        """Not implemented: cloudzones resolves EC2 nodes only from instance metadata."""
        raise NotImplementedError("AWS node lookups through the EC2 API are not implemented; use node-agent mode")

    def topology_by_node_name(self, node_name: str) -> Topology:
        """Not implemented: cloudzones resolves EC2 nodes only from instance metadata."""
        raise NotImplementedError("AWS node lookups through the EC2 API are not implemented; use node-agent mode")
