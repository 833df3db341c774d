"""Helpers for tests/test_deploy_manifests.py: a source scan for KubeClient calls and a small kustomize."""

from __future__ import annotations

import ast
import copy
import pathlib
from typing import Any

import jsonpatch
import yaml

from cloudzones import kube

_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
_GROUPS = {"CoreV1Api": "", "CoordinationV1Api": "coordination.k8s.io", "StorageV1Api": "storage.k8s.io"}
_CONSTANTS = {name: value for name, value in vars(kube).items() if isinstance(value, kube.Resource)}
Call = tuple[str, str, str]  # (apiGroup, resource, verb)


def _resource_of(node: ast.expr | None) -> kube.Resource | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kube":
        return _CONSTANTS.get(node.attr)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return kube.RESOURCES.get(node.value)
    return None


def kube_calls(source: str, where: str = "<source>") -> set[Call]:
    """The (group, resource, verb) triples of the KubeClient calls and Informers in ``source``.

    A call on something named ``*client`` whose resource is not a literal ``kube.X`` (or plural
    string) is refused: the RBAC check could not see it.
    """
    found: set[Call] = set()
    for call in ast.walk(ast.parse(source)):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        if name == "Informer":
            arg, verbs = (call.args[1] if len(call.args) > 1 else keywords.get("resource")), ("list", "watch")
        elif isinstance(func, ast.Attribute) and name in _VERBS:
            arg, verbs = (call.args[0] if call.args else keywords.get("resource")), (name,)
        else:
            continue
        resource = _resource_of(arg)
        if resource is None:
            receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            assert not receiver.endswith("client") and name != "Informer", (
                f"{where}:{call.lineno}: {ast.unparse(call)} names its resource indirectly; pass kube.X "
                "literally so that the RBAC test can see which rights it needs")
            continue
        plural = resource.plural
        subresource = keywords.get("subresource")
        if isinstance(subresource, ast.Constant) and subresource.value:
            plural += f"/{subresource.value}"
        found.update((_GROUPS[resource.api], plural, verb) for verb in verbs)
    return found


def load(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def kustomization(directory: pathlib.Path) -> dict[str, Any]:
    return load(directory / "kustomization.yaml")[0]


def _patched(spec: dict[str, Any], docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for patch in spec.get("patches") or []:
        target = patch["target"]
        hits = [d for d in docs if d["kind"] == target["kind"] and d["metadata"]["name"] == target["name"]]
        assert len(hits) == 1, f"patch target {target} matches {len(hits)} objects"
        docs = [jsonpatch.apply_patch(d, yaml.safe_load(patch["patch"])) if d is hits[0] else d for d in docs]
    for image in spec.get("images") or []:
        for doc in docs:
            for container in containers(doc):
                if container["image"] == image["name"]:
                    container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    return docs


def build(directory: pathlib.Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize directory`` prints, for the features deploy/ uses.

    Resources (files and directories), components, JSON6902 patches with a kind/name target, images.
    """
    spec = kustomization(directory)
    docs: list[dict[str, Any]] = []
    for entry in spec.get("resources") or []:
        path = directory / entry
        docs.extend(build(path) if path.is_dir() else copy.deepcopy(load(path)))
    for entry in spec.get("components") or []:
        component = kustomization(directory / entry)
        assert component["kind"] == "Component"
        docs = _patched(component, docs + [d for f in component.get("resources") or []
                                           for d in load(directory / entry / f)])
    return _patched(spec, docs)


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    hits = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(hits) == 1, f"{len(hits)} {kind} named {name}"
    return hits[0]


