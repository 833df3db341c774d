"""Pod-template pieces that hand a pod its node's zone: downward-API env, a waiting init container (pure).

The pod zone annotator copies each node topology label onto the pod as an annotation of the same
key (``topology.kubernetes.io/zone``). A pod cannot read node labels through the downward API, but
it can read its own annotations, so: one env var per key from that annotation, the combined value
(several keys joined with ``_``, the Loki operator's convention) composed with Kubernetes' ``$(VAR)``
expansion, and an init container that waits until every annotation file in a downward-API volume
is non-empty, because env vars are resolved once, when the container starts, and the annotator
writes the annotations only after the pod has been bound. This is the Loki operator's
``az-annotation-check`` gate, reading the per-key annotations instead of one operator-written one.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from typing import Any

from cloudzones.workloads import findings

ENV_NAME = "INSTANCE_AVAILABILITY_ZONE"
"""The env var Loki's ring config reads (``instance_availability_zone: ${INSTANCE_AVAILABILITY_ZONE}``)."""
VOLUME_NAME = "az-annotation"
MOUNT_PATH = "/etc/az-annotation"
INIT_CONTAINER_NAME = "az-annotation-check"
SEPARATOR = "_"
DEFAULT_IMAGE = "docker.io/library/busybox:1.36"
"""Any image with a POSIX shell; the Loki operator reuses the component's own image."""


@dataclasses.dataclass(frozen=True)
class ZoneInjection:
    """What to merge into a pod template so its containers learn the zone before they start."""

    annotations: tuple[str, ...]
    """Pod annotations (named like the node labels) the pod zone annotator must write."""
    env: tuple[dict[str, Any], ...]
    """Env vars for every container; the last one is the combined value under `ENV_NAME`."""
    volume: dict[str, Any]
    """The downward-API volume holding one file per annotation."""
    init_container: dict[str, Any]
    """Waits until every annotation file is non-empty."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, in pod-template field names."""
        return {"annotations": list(self.annotations), "env": [dict(e) for e in self.env],
                "volumes": [self.volume], "initContainers": [self.init_container]}


def annotation_field(key: str) -> str:
    """The downward-API fieldPath of annotation ``key``."""
    return f"metadata.annotations['{key}']"


def zone_injection(keys: Sequence[str], *, image: str = DEFAULT_IMAGE, env_name: str = ENV_NAME,
                   interval_seconds: int = 2) -> ZoneInjection:
    """The pieces for the topology ``keys`` in order; `InvalidWorkloadSpec` for no, empty or repeated keys."""
    ordered = list(keys)
    if not ordered or any(not isinstance(k, str) or not k for k in ordered) or len(set(ordered)) != len(ordered):
        raise findings.invalid("zone-injection-keys",
                               f"zone injection needs distinct, non-empty topology keys, got {ordered!r}")
    if not image:
        raise findings.invalid("zone-injection-image", "zone injection needs an init container image")
    files = [f"zone-{i}" for i in range(len(ordered))]
    volume = {"name": VOLUME_NAME, "downwardAPI": {"items": [
        {"path": path, "fieldRef": {"fieldPath": annotation_field(key)}}
        for path, key in zip(files, ordered, strict=True)]}}
    if len(ordered) == 1:
        env: list[dict[str, Any]] = [
            {"name": env_name, "valueFrom": {"fieldRef": {"fieldPath": annotation_field(ordered[0])}}}]
    else:
        parts = [f"TOPOLOGY_VALUE_{i}" for i in range(len(ordered))]
        env = [{"name": part, "valueFrom": {"fieldRef": {"fieldPath": annotation_field(key)}}}
               for part, key in zip(parts, ordered, strict=True)]
        # Kubernetes expands $(NAME) from env vars defined earlier in the same list.
        env.append({"name": env_name, "value": SEPARATOR.join(f"$({part})" for part in parts)})
    lines = []
    for path, key in zip(files, ordered, strict=True):
        target = shlex.quote(f"{MOUNT_PATH}/{path}")
        message = shlex.quote(f"Waiting for annotation {key} to be set on this pod")
        lines.append(f"until [ -s {target} ]; do echo {message}; sleep {interval_seconds}; done")
    lines.append("echo 'availability zone annotations are set'")
    init_container = {
        "name": INIT_CONTAINER_NAME, "image": image, "command": ["sh", "-c", "\n".join(lines)],
        "volumeMounts": [{"name": VOLUME_NAME, "mountPath": MOUNT_PATH, "readOnly": True}]}
    return ZoneInjection(tuple(ordered), tuple(env), volume, init_container)
