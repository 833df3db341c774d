"""Fake Azure for tests and ``cloudzones simulate``: `FakeImds` (per-node IMDS) and `FakeArm` (Compute ARM).

Both keep their state in memory, count calls, can inject faults, and serve either over loopback
(FakeArm over HTTPS: the Azure SDK refuses bearer tokens on plain HTTP) or through ``responses``.
Payloads follow the shapes of the ARM and IMDS examples in ``fixtures/`` (see fixtures/SOURCES.md).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from cloudzones.testing._json_tree import to_json
from cloudzones.testing._loopback import LoopbackServer
from cloudzones.testing.tls import TlsFiles, make_tls_files
from providers.azure import resource_ids

Reply = tuple[int, Mapping[str, str], bytes]
_JSON = {"Content-Type": "application/json; charset=utf-8"}


def _reply(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
    return status, {**_JSON, **(headers or {})}, to_json(body)


@dataclasses.dataclass
class _Faults:
    """Fail the next ``count`` requests whose method is in ``methods`` with ``status``."""

    rules: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def add(self, *, status: int, count: int, methods: tuple[str, ...], retry_after: float | None, match: str) -> None:
        with self.lock:
            self.rules.append({"status": status, "count": count, "methods": methods, "retry_after": retry_after,
                               "match": match})

    def take(self, method: str, path: str) -> Reply | None:
        with self.lock:
            for rule in self.rules:
                if rule["count"] > 0 and method in rule["methods"] and rule["match"] in path.lower():
                    rule["count"] -= 1
                    headers = {} if rule["retry_after"] is None else {"Retry-After": str(rule["retry_after"])}
                    code = "TooManyRequests" if rule["status"] == 429 else "InternalServerError"
                    return _reply(rule["status"], {"error": {"code": code, "message": "injected fault"}}, headers)
        return None


class StaticCredential:
    """An azure-core ``TokenCredential`` that hands out a fixed fake token, for the fakes above."""

    def __init__(self, token: str = "fake-token") -> None:  # noqa: S107 - not a secret
        self._token = token
        self.requests = 0

    def __repr__(self) -> str:
        return "StaticCredential()"

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        self.requests += 1
        return AccessToken(self._token, int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> Any:
        from azure.core.credentials import AccessTokenInfo

        self.requests += 1
        return AccessTokenInfo(self._token, int(time.time()) + 3600)


class FakeImds:
    """Azure IMDS for many machines: machine ``name`` is served under ``url_for(name)``."""

    def __init__(self) -> None:
        self.documents: dict[str, dict[str, Any]] = {}
        self.calls: collections.Counter[str] = collections.Counter()
        self._faults = _Faults()
        self._server: LoopbackServer | None = None

    def add_machine(self, name: str, *, location: str, zone: str = "", fault_domain: int | str = 0,
                    resource_id: str = "", vm_scale_set: str = "") -> None:
        """Describe machine ``name`` (``zone`` ``""`` for an unzoned VM)."""
        self.documents[name] = {"compute": {
            "location": location, "name": name, "zone": zone, "platformFaultDomain": str(fault_domain),
            "platformUpdateDomain": "0", "platformSubFaultDomain": "", "vmScaleSetName": vm_scale_set,
            "resourceId": resource_id, "azEnvironment": "AzurePublicCloud", "osType": "Linux",
        }, "network": {"interface": []}}

    def fail_next(self, count: int, *, status: int = 500, retry_after: float | None = None) -> None:
        """Answer the next ``count`` requests with ``status``."""
        self._faults.add(status=status, count=count, methods=("GET",), retry_after=retry_after, match="")

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes = b"") -> Reply:
        """Answer one request the way IMDS does (``Metadata: true`` required, ``api-version`` required)."""
        url = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/metadata/identity/oauth2/token":
            return self._token(headers, query)
        match = re.fullmatch(r"/node/(?P<name>[^/]+)/metadata/instance", url.path)
        name = urllib.parse.unquote(match["name"]) if match else ""
        self.calls[name] += 1
        if {k.lower(): v for k, v in headers.items()}.get("metadata", "").lower() != "true":
            return _reply(400, {"error": "Bad request. Required metadata header not specified"})
        if "api-version" not in query:
            return _reply(400, {"error": "Bad request. api-version is invalid or was not specified in the request."})
        fault = self._faults.take(method, path)
        if fault is not None:
            return fault
        if method != "GET":
            return _reply(405, {"error": "Method not allowed"})
        if name not in self.documents:
            return _reply(404, {"error": "Not found"})
        return _reply(200, self.documents[name])

    def _token(self, headers: Mapping[str, str], query: Mapping[str, list[str]]) -> Reply:
        """The managed-identity token endpoint: a fake ARM token for any ``resource`` (no header: 400, as IMDS)."""
        self.calls["identity"] += 1
        if {k.lower(): v for k, v in headers.items()}.get("metadata", "").lower() != "true":
            return _reply(400, {"error": "invalid_request",
                                "error_description": "Required metadata header not specified"})
        resource = (query.get("resource") or [""])[0]
        expires = int(time.time()) + 3600
        return _reply(200, {"access_token": "fake-managed-identity-token", "expires_in": "3600",
                            "expires_on": str(expires), "not_before": str(expires - 3600),
                            "resource": resource, "token_type": "Bearer"})

    @property
    def identity_host(self) -> str:
        """The value for ``AZURE_POD_IDENTITY_AUTHORITY_HOST``: azure-identity's managed identity then asks us."""
        assert self._server is not None, "start() the FakeImds first"
        return self._server.url

    def start(self) -> FakeImds:
        """Serve over HTTP on loopback (IMDS is plain HTTP)."""
        self._server = LoopbackServer(self.handle).start()
        return self

    def url_for(self, name: str) -> str:
        """The ``imds_url`` that machine ``name`` should use."""
        assert self._server is not None, "start() the FakeImds first"
        return f"{self._server.url}/node/{urllib.parse.quote(name)}"

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.stop()


@dataclasses.dataclass(frozen=True)
class Hold:
    """A reply being held back (`FakeArm.hold_next`): ``reached`` once the write is done, ``release()`` to answer."""

    method: str
    match: str
    reached: threading.Event = dataclasses.field(default_factory=threading.Event)
    released: threading.Event = dataclasses.field(default_factory=threading.Event)

    def release(self) -> None:
        """Send the held reply (to a connection that may be gone)."""
        self.released.set()


class FakeArm:
    """In-memory Azure Resource Manager for Microsoft.Compute: VMs, scale sets and their VMs, managed disks."""

    def __init__(self, *, subscription: str, resource_group: str, location: str) -> None:
        self.subscription, self.resource_group, self.location = subscription, resource_group.lower(), location
        self.vms: dict[str, dict[str, Any]] = {}
        self.scale_sets: dict[str, dict[str, Any]] = {}
        self.scale_set_vms: dict[str, dict[str, dict[str, Any]]] = {}
        self.disks: dict[str, dict[str, Any]] = {}
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()
        """Requests by (method, resource kind), e.g. ``("GET", "scaleSetVMs")``."""
        self._lock = threading.RLock()
        self._faults = _Faults()
        self._holds: list[Hold] = []
        self._server: LoopbackServer | None = None
        self._own_tls: tempfile.TemporaryDirectory[str] | None = None
        self.tls: TlsFiles | None = None

    # -- inventory ------------------------------------------------------------------------------

    def _base(self) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/Microsoft.Compute"

    def add_vm(self, name: str, *, zone: str | None = None, fault_domain: int | None = 0,
               computer_name: str | None = None, scale_set: str | None = None) -> dict[str, Any]:
        """A standalone (or, with ``scale_set``, flexible-VMSS) VM."""
        props: dict[str, Any] = {"osProfile": {"computerName": computer_name or name}, "provisioningState": "Succeeded"}
        if fault_domain is not None:
            props["instanceView"] = {"platformFaultDomain": fault_domain, "platformUpdateDomain": 0}
        if scale_set:
            props["virtualMachineScaleSet"] = {"id": f"{self._base()}/virtualMachineScaleSets/{scale_set}"}
        vm = {"id": f"{self._base()}/virtualMachines/{name}", "name": name, "type": "Microsoft.Compute/virtualMachines",
              "location": self.location, "properties": props}
        if zone:
            vm["zones"] = [zone]
        with self._lock:
            self.vms[name.lower()] = vm
        return vm

    def add_scale_set(self, name: str, *, prefix: str | None = None, uniform: bool = True) -> None:
        """A scale set (uniform by default) whose instances are named ``<prefix><6 base-36 digits>``."""
        with self._lock:
            self.scale_sets[name.lower()] = {
                "id": f"{self._base()}/virtualMachineScaleSets/{name}", "name": name, "location": self.location,
                "type": "Microsoft.Compute/virtualMachineScaleSets",
                "properties": {"orchestrationMode": "Uniform" if uniform else "Flexible",
                               "virtualMachineProfile": {"osProfile": {"computerNamePrefix": prefix or name}}}}
            self.scale_set_vms.setdefault(name.lower(), {})

    def add_scale_set_vm(self, scale_set: str, instance_id: int, *, zone: str | None = None,
                         fault_domain: int | None = 0) -> str:
        """An instance of a uniform scale set; returns its computer (node) name."""
        prefix = self.scale_sets[scale_set.lower()]["properties"]["virtualMachineProfile"]["osProfile"]
        computer = resource_ids.vmss_computer_name(prefix['computerNamePrefix'], instance_id)
        props: dict[str, Any] = {"osProfile": {"computerName": computer}, "provisioningState": "Succeeded"}
        if fault_domain is not None:
            props["instanceView"] = {"platformFaultDomain": fault_domain, "platformUpdateDomain": 0}
        vm = {"id": f"{self._base()}/virtualMachineScaleSets/{scale_set}/virtualMachines/{instance_id}",
              "name": f"{scale_set}_{instance_id}", "instanceId": str(instance_id), "location": self.location,
              "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", "properties": props}
        if zone:
            vm["zones"] = [zone]
        with self._lock:
            self.scale_set_vms[scale_set.lower()][str(instance_id)] = vm
        return computer

    def throttle_next(self, count: int, *, retry_after: float = 1, methods: tuple[str, ...] = ("GET",),
                      match: str = "") -> None:
        """Answer the next ``count`` matching requests with 429 and ``Retry-After``."""
        self._faults.add(status=429, count=count, methods=methods, retry_after=retry_after, match=match.lower())

    def fail_next(self, count: int, *, status: int = 500, methods: tuple[str, ...] = ("GET",), match: str = "") -> None:
        """Answer the next ``count`` matching requests with a server error."""
        self._faults.add(status=status, count=count, methods=methods, retry_after=None, match=match.lower())

    def hold_next(self, method: str, match: str) -> Hold:
        """Carry out the next ``method`` request whose path contains ``match``, but hold its reply until the
        returned `Hold` is released: a client killed meanwhile never learns that its write happened."""
        hold = Hold(method.upper(), match.lower())
        with self._lock:
            self._holds.append(hold)
        return hold

    # -- HTTP -----------------------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes = b"") -> Reply:
        """Answer one ARM request."""
        url = urllib.parse.urlsplit(path)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        low = [p.lower() for p in parts]
        if (len(parts) < 7 or low[0] != "subscriptions" or low[2] != "resourcegroups"
                or low[1] != self.subscription.lower() or low[3] != self.resource_group
                or low[4:6] != ["providers", "microsoft.compute"]):
            return _reply(404, {"error": {"code": "ResourceGroupNotFound", "message": f"unknown scope {url.path}"}})
        rest, rest_low = parts[6:], low[6:]
        kind = _kind(rest_low)
        self.calls[(method, kind)] += 1
        fault = self._faults.take(method, url.path)
        if fault is not None:
            return fault
        with self._lock:
            reply = self._route(method, rest, rest_low, body)
            hold = next((h for h in self._holds if h.method == method and h.match in url.path.lower()), None)
            if hold is not None:
                self._holds.remove(hold)
        if hold is not None:
            hold.reached.set()
            hold.released.wait(60)
        return reply

    def _route(self, method: str, rest: list[str], low: list[str], body: bytes) -> Reply:
        if low == ["virtualmachines"] and method == "GET":
            return _reply(200, {"value": [_without_view(vm) for vm in self.vms.values()]})
        if low == ["virtualmachinescalesets"] and method == "GET":
            return _reply(200, {"value": list(self.scale_sets.values())})
        if len(low) == 2 and low[0] == "virtualmachines" and method == "GET":
            vm = self.vms.get(low[1])
            return _reply(200, vm) if vm else _not_found("VirtualMachine", rest[1])
        if len(low) == 3 and low[0] == "virtualmachines" and low[2] == "instanceview" and method == "GET":
            vm = self.vms.get(low[1])
            if vm is None:
                return _not_found("VirtualMachine", rest[1])
            return _reply(200, vm["properties"].get("instanceView", {}))
        if len(low) == 3 and low[0] == "virtualmachinescalesets" and low[2] == "virtualmachines" and method == "GET":
            vms = self.scale_set_vms.get(low[1])
            if vms is None:
                return _not_found("VirtualMachineScaleSet", rest[1])
            return _reply(200, {"value": list(vms.values())})
        if len(low) == 2 and low[0] == "disks":
            return self._disk(method, rest[1], body)
        return _reply(404, {"error": {"code": "NotFound", "message": f"no route for {method} {'/'.join(rest)}"}})

    def _disk(self, method: str, name: str, body: bytes) -> Reply:
        key = name.lower()
        if method == "GET":
            disk = self.disks.get(key)
            return _reply(200, disk) if disk else _not_found("Disk", name)
        if method == "DELETE":
            disk = self.disks.get(key)
            if disk is None:
                return 204, {}, b""
            if disk.get("managedBy"):
                return _reply(409, {"error": {"code": "OperationNotAllowed", "message": f"Disk {name} is attached"}})
            del self.disks[key]
            return 200, {}, b""
        if method == "PUT":
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                return _reply(400, {"error": {"code": "InvalidRequestContent", "message": "body is not JSON"}})
            sku = str((request.get("sku") or {}).get("name") or "Standard_LRS")
            if request.get("zones") and sku.endswith("_ZRS"):
                return _reply(400, {"error": {"code": "OperationNotAllowed", "message":
                                              f"A disk with sku '{sku}' cannot be created in an availability zone."}})
            props = dict(request.get("properties") or {})
            props.update(provisioningState="Succeeded", diskState="Unattached")
            disk = {"id": f"{self._base()}/disks/{name}", "name": name, "type": "Microsoft.Compute/disks",
                    "location": request.get("location") or self.location, "sku": {"name": sku},
                    "tags": request.get("tags") or {}, "properties": props}
            if request.get("zones"):
                disk["zones"] = list(request["zones"])
            self.disks[key] = disk
            return _reply(200, disk)
        return _reply(405, {"error": {"code": "MethodNotAllowed", "message": method}})

    # -- serving --------------------------------------------------------------------------------

    def start(self, *, tls: TlsFiles | None = None) -> FakeArm:
        """Serve over HTTPS on loopback; ``url`` and ``tls.ca_file`` are what clients need.

        Without ``tls`` a throwaway CA is made in a temporary folder that `stop` removes.
        """
        if tls is None:
            self._own_tls = tempfile.TemporaryDirectory(prefix="cloudzones-tls-")
            tls = make_tls_files(self._own_tls.name)
        self.tls = tls
        self._server = LoopbackServer(self.handle, tls=self.tls).start()
        return self

    @property
    def url(self) -> str:
        """The ``resource_manager_url`` to give `AzureProvider`."""
        assert self._server is not None, "start() the FakeArm first"
        return self._server.url

    def stop(self) -> None:
        """Stop serving (and remove the CA `start` made)."""
        if self._server is not None:
            self._server.stop()
        if self._own_tls is not None:
            self._own_tls.cleanup()
            self._own_tls = None

    def register(self, mock: Any, *, base_url: str = "https://management.azure.com") -> None:
        """Serve through a ``responses.RequestsMock`` instead of a socket."""
        pattern = re.compile(re.escape(base_url) + r"/subscriptions/.*")

        def callback(request: Any) -> tuple[int, dict[str, str], bytes]:
            path = request.url[len(base_url):]
            raw = request.body or b""
            status, headers, payload = self.handle(request.method, path, dict(request.headers),
                                                   raw.encode() if isinstance(raw, str) else raw)
            return status, dict(headers), payload

        for method in ("GET", "PUT", "DELETE"):
            mock.add_callback(method, pattern, callback=callback)


def _kind(low: list[str]) -> str:
    if low[:1] == ["disks"]:
        return "disks"
    if low[:1] == ["virtualmachinescalesets"]:
        return "scaleSetVMs" if len(low) >= 3 else "scaleSets"
    return "virtualMachines"


def _without_view(vm: dict[str, Any]) -> dict[str, Any]:
    # ARM's list omits the instance view unless asked with a filter.
    return {**vm, "properties": {k: v for k, v in vm["properties"].items() if k != "instanceView"}}


def _not_found(kind: str, name: str) -> Reply:
    return _reply(404, {"error": {"code": "ResourceNotFound", "message": f"The {kind} '{name}' was not found."}})
