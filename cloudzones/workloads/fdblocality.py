"""FoundationDB process localities from the design's ``localities: [{key, value, envValue, topologyKey}]`` (pure).

Each locality of a process is resolved with the design's precedence: a static ``value``, else the
process's env var named by ``envValue``, else the label ``topologyKey`` of the node the process runs
on. Keys are reported prefixed ``locality_`` (``locality_zoneid``), as fdbserver takes them on its
command line. The shipped operator never implemented this list (it has ``faultDomain`` and
``NODE_LABEL_*`` env vars instead); this module follows the design.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from cloudzones.workloads import _manifests as m
from cloudzones.workloads import findings as f

PREFIX = "locality_"
ZONEID = "zoneid"
DATA_HALL = "data_hall"
DCID = "dcid"
HOSTNAME = "kubernetes.io/hostname"


@dataclasses.dataclass(frozen=True)
class LocalitySpec:
    """One ``spec.localities`` entry; ``key`` is stored without the ``locality_`` prefix."""

    key: str
    value: str | None = None
    env_value: str | None = None
    topology_key: str | None = None

    @property
    def prefixed(self) -> str:
        """``locality_<key>``."""
        return PREFIX + self.key

    def describe_sources(self) -> str:
        """Where the value may come from, for messages."""
        parts = []
        if self.env_value:
            parts.append(f"env var {self.env_value!r}")
        if self.topology_key:
            parts.append(f"node label {self.topology_key!r}")
        return " or ".join(parts) or "nowhere"


@dataclasses.dataclass(frozen=True)
class Process:
    """A FoundationDB process (process group) that may become a coordinator."""

    id: str
    process_class: str
    node: str = ""
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    version: str = ""
    """The running version; a process not on the cluster's version is a last-resort candidate."""
    excluded: bool = False
    """Excluded or marked for removal: never a candidate."""


def strip_prefix(key: str) -> str:
    """``locality_zoneid`` → ``zoneid``."""
    return key[len(PREFIX):] if key.startswith(PREFIX) else key


def parse_localities(raw: Any, subject: str) -> list[LocalitySpec]:
    """``spec.localities`` entries; `InvalidWorkloadSpec` for an entry without a key or any source, or a repeat."""
    result: list[LocalitySpec] = []
    for index, item in enumerate(m.sequence(raw, "spec.localities", subject)):
        where = f"spec.localities[{index}]"
        entry = m.mapping(item, where, subject)
        key = entry.get("key")
        if not isinstance(key, str) or not strip_prefix(key.strip()):
            raise f.invalid("locality-key", f"{where}.key must be a non-empty string, got {key!r}", subject)
        spec = LocalitySpec(strip_prefix(key.strip()), _text(entry.get("value")), _text(entry.get("envValue")),
                            _text(entry.get("topologyKey")))
        if spec.value is None and spec.env_value is None and spec.topology_key is None:
            raise f.invalid("locality-source", f"{where} ({spec.prefixed}) needs value, envValue or topologyKey",
                            subject)
        if any(s.key == spec.key for s in result):
            raise f.invalid("locality-duplicate", f"{where}: {spec.prefixed} is listed twice", subject)
        result.append(spec)
    return result


def parse_processes(raw: Any, subject: str) -> list[Process]:
    """The ``processes`` list: ``{id, processClass, node, env, version, excluded}``; ids must be unique."""
    result: list[Process] = []
    for index, item in enumerate(m.sequence(raw, "processes", subject)):
        where = f"processes[{index}]"
        entry = m.mapping(item, where, subject)
        pid, cls = entry.get("id"), entry.get("processClass")
        if not isinstance(pid, str) or not pid:
            raise f.invalid("process-id", f"{where}.id must be a non-empty string, got {pid!r}", subject)
        if not isinstance(cls, str) or not cls:
            raise f.invalid("process-class", f"{where}.processClass must be a non-empty string, got {cls!r}", pid)
        if any(p.id == pid for p in result):
            raise f.invalid("process-id", f"process id {pid!r} is listed twice", subject)
        env = m.mapping(entry.get("env"), f"{where}.env", pid)
        result.append(Process(pid, cls, str(entry.get("node") or ""), {str(k): str(v) for k, v in env.items()},
                              str(entry.get("version") or ""), bool(entry.get("excluded"))))
    return result


def resolve(process: Process, specs: Sequence[LocalitySpec],
            node_labels: Mapping[str, Mapping[str, str]]) -> tuple[dict[str, str], list[f.Finding]]:
    """The process's localities (unprefixed key → value) and an error finding per locality that stays unset."""
    values: dict[str, str] = {}
    problems: list[f.Finding] = []
    labels = node_labels.get(process.node)
    for spec in specs:
        value = spec.value
        if value is None and spec.env_value:
            value = process.env.get(spec.env_value) or None
        if value is None and spec.topology_key and labels is not None:
            value = labels.get(spec.topology_key) or None
        if value is not None:
            values[spec.key] = value
            continue
        why = []
        if spec.env_value:
            why.append(f"env var {spec.env_value!r} is not set")
        if spec.topology_key:
            if not process.node:
                why.append("the process has no node")
            elif labels is None:
                why.append(f"its node {process.node!r} is not among the nodes given")
            else:
                why.append(f"node {process.node!r} has no label {spec.topology_key!r}")
        problems.append(f.error("locality-missing", f"{spec.prefixed} has no value: {' and '.join(why)}",
                                process.id))
    return values, problems


def prefixed(values: Mapping[str, str]) -> dict[str, str]:
    """Keys with the ``locality_`` prefix, sorted."""
    return {PREFIX + k: values[k] for k in sorted(values)}


#: The operator's defaults for ``spec.labels.processClassLabels`` and ``processGroupIDLabels`` (first found wins).
CLASS_LABELS = ("fdb-process-class", "foundationdb.org/fdb-process-class")
GROUP_ID_LABELS = ("fdb-instance-id", "foundationdb.org/fdb-process-group-id")
CLUSTER_NAME_LABEL = "foundationdb.org/fdb-cluster-name"


def processes_from_pods(cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``processes`` entries of a FoundationDBCluster's running pods, as the operator labels them.

    A pod belongs to the cluster when it is in its namespace and carries ``spec.labels.matchLabels``
    (default: ``foundationdb.org/fdb-cluster-name: <name>``); its class and process-group id come from
    the first of ``spec.labels.processClassLabels`` / ``processGroupIDLabels`` it has (the operator's
    defaults otherwise); its env from its containers' literal ``env`` values. Pods without a class are left out.
    """
    spec = _map(cluster.get("spec"))
    options = _map(spec.get("labels"))
    match = dict(_map(options.get("matchLabels"))) or {CLUSTER_NAME_LABEL: m.name_of(cluster)}
    class_labels = _label_names(options.get("processClassLabels"), CLASS_LABELS)
    id_labels = _label_names(options.get("processGroupIDLabels"), GROUP_ID_LABELS)
    namespace = m.namespace_of(cluster)
    result = []
    for pod in pods:
        pod_labels = (pod.get("metadata") or {}).get("labels") or {}
        if m.namespace_of(pod) != namespace or any(pod_labels.get(k) != v for k, v in match.items()):
            continue
        cls = next((str(pod_labels[k]) for k in class_labels if pod_labels.get(k)), "")
        if not cls:
            continue
        env = {str(e.get("name")): str(e.get("value")) for c in (pod.get("spec") or {}).get("containers") or []
               for e in (c or {}).get("env") or [] if isinstance(e, Mapping) and e.get("value") is not None}
        result.append({"id": next((str(pod_labels[k]) for k in id_labels if pod_labels.get(k)), m.name_of(pod)),
                       "processClass": cls, "node": str((pod.get("spec") or {}).get("nodeName") or ""), "env": env})
    return result


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _label_names(raw: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(str(x) for x in raw) if isinstance(raw, list) and raw else default


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None
