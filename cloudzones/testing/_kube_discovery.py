"""Discovery documents of the fake API server: what ``kubectl`` reads before it touches an object.

Legacy (unaggregated) discovery only: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>`` and
``/apis/<group>/<version>``, built from the served resources. kubectl asks for aggregated discovery
(``as=APIGroupDiscoveryList``) first and falls back to these when the answer is plain JSON.

OpenAPI v3 is a skeleton: ``/openapi/v3`` lists one document per group version, and each document
holds only the PATCH operations, each naming its kind and the ``fieldValidation`` query parameter
(no schemas, no request bodies). That is what ``kubectl apply`` looks for to leave validation to
the server instead of downloading the whole OpenAPI v2 schema; without request bodies it computes
strategic merge patches from its compiled-in types. ``/openapi/v2`` is not served (404).
"""

from __future__ import annotations

from typing import Any

from cloudzones.testing import _kube_status as status

_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
_SUBRESOURCE_VERBS = ["get", "patch", "update"]
_SHORT_NAMES = {
    "nodes": ["no"], "persistentvolumes": ["pv"], "persistentvolumeclaims": ["pvc"], "pods": ["po"],
    "events": ["ev"], "storageclasses": ["sc"],
}


def _group_versions() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rtype in status.RESOURCES.values():
        if rtype.group and rtype.version not in groups.setdefault(rtype.group, []):
            groups[rtype.group].append(rtype.version)
    return groups


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{version}", "version": version} for version in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def _resources(group: str, version: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for rtype in status.RESOURCES.values():
        if (rtype.group, rtype.version) != (group, version):
            continue
        entry: dict[str, Any] = {"name": rtype.plural, "singularName": rtype.kind.lower(),
                                 "namespaced": rtype.namespaced, "kind": rtype.kind, "verbs": _VERBS}
        if rtype.plural in _SHORT_NAMES:
            entry["shortNames"] = _SHORT_NAMES[rtype.plural]
        found.append(entry)
        if rtype.has_status:
            found.append({"name": f"{rtype.plural}/status", "singularName": "", "namespaced": rtype.namespaced,
                          "kind": rtype.kind, "verbs": _SUBRESOURCE_VERBS})
    return found


def document(path: str, server_address: str) -> dict[str, Any] | None:
    """The discovery document at ``path`` (no trailing slash), or None when ``path`` is not a discovery path."""
    parts = [part for part in path.split("/") if part]
    groups = _group_versions()
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}
    if parts == ["api", "v1"]:
        return {"kind": "APIResourceList", "groupVersion": "v1", "resources": _resources("", "v1")}
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [_group(name, versions) for name, versions in sorted(groups.items())]}
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], groups[parts[1]])}
    if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], []):
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{parts[1]}/{parts[2]}",
                "resources": _resources(parts[1], parts[2])}
    return None


def _openapi_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi(path: str) -> dict[str, Any] | None:
    """The OpenAPI v3 skeleton at ``path`` (``/openapi/v3`` or ``/openapi/v3/<group version path>``), else None."""
    if not path.startswith("/openapi/v3"):
        return None
    wanted = path.removeprefix("/openapi/v3").strip("/")
    keys = {_openapi_key(r.group, r.version): (r.group, r.version) for r in status.RESOURCES.values()}
    if not wanted:
        return {"paths": {key: {"serverRelativeURL": f"/openapi/v3/{key}"} for key in sorted(keys)}}
    if wanted not in keys:
        return None
    group, version = keys[wanted]
    paths: dict[str, Any] = {}
    for rtype in status.RESOURCES.values():
        if (rtype.group, rtype.version) != (group, version):
            continue
        scope = "/namespaces/{namespace}" if rtype.namespaced else ""
        paths[f"/{wanted}{scope}/{rtype.plural}/{{name}}"] = {"patch": {
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": rtype.kind},
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
        }}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (cloudzones fake)", "version": "v1.37.2"},
            "paths": paths}
