"""Zone choice for a new volume from its claim name: Kubernetes' exact hash, and a balanced variant.

Kubernetes (``ChooseZonesForVolume`` in k8s.io/cloud-provider/volume/helpers/zones.go, and the
same code in the CSI external-provisioner) spreads StatefulSet volumes with no state at all: a
claim ``<template>-<statefulset>-<ordinal>`` is placed in ``sorted(zones)[(hash + ordinal) % n]``
where ``hash`` is the 32-bit FNV-1 of the *last dash-token* before the ordinal. Hashing only that
token makes every claim template of one pod agree on the zone (``data-web-0`` and ``logs-web-0``
both hash ``web``), and consecutive ordinals walk round the zones. :func:`kubernetes_zones`
reproduces it bit for bit, uint32 wrap-around included.

**Balanced mode** (:func:`balanced_zones`, the default of ``storageclass.select_zones``) differs
in three ways:

1. It hashes the whole StatefulSet name, not its last dash-token. Kubernetes hashes ``db`` for
   every one of ``svc1-db`` … ``svc99-db``, so all 99 first volumes land in the same zone (the
   limitation the Azure zones KEP lists: "If the name of the StatefulSet contains dashes, volume
   zone spreading may not provide a uniform distribution"). Balanced mode hashes ``svc1-db``,
   ``svc2-db`` … and their starting zones spread evenly.
2. A claim name does not say where the claim template ends and the StatefulSet name begins
   (``my-data-web-0`` may be template ``my-data`` of ``web`` or template ``my`` of ``data-web``).
   When the caller knows the StatefulSet (``statefulset=``: from the claim's owner reference or a
   StatefulSet lookup) the split is exact. Otherwise balanced mode takes the template to be the
   first dash-token — the usual ``data``, ``www``, ``datadir`` — and the rest to be the
   StatefulSet. Only a pod with a *dashed* claim template and an unknown StatefulSet can then see
   its claims split across zones (Kubernetes never splits them, because it hashes so little);
   pass ``statefulset=`` in that case.
3. The hash is the first 64 bits of SHA-256 rather than FNV-1 (whose last byte only flips low
   bits, so similar names cluster), and the ordinal is added with unbounded integers. Kubernetes
   adds in uint32, so when ``hash + ordinal`` wraps past 2^32 two consecutive ordinals land in
   the same zone; in balanced mode consecutive ordinals are *always* in different zones (when
   there are at least two).

The balance across StatefulSets is that of a uniform hash, not a schedule: 99 StatefulSets
``svc1-db`` … ``svc99-db`` over three zones start 38 / 34 / 27 instead of 99 / 0 / 0.

Balanced mode keeps Kubernetes' two guarantees: consecutive ordinals in different zones (which
Kubernetes itself breaks at the uint32 wrap), and every claim of one StatefulSet member in the
same zone (given the split described in 2).
Neither mode needs state, so both give the same answer on every provisioner replica and retry.
An empty claim name makes Kubernetes draw a random zone; here it hashes the empty string, so the
result stays deterministic (a real claim always has a name).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable

from cloudzones import errors

_UINT32 = 0xFFFFFFFF
_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
# strconv.ParseUint(s, 10, 32): ASCII digits only (no sign, no "_", no non-ASCII digits).
_ORDINAL = re.compile(r"[0-9]{1,10}")  # a uint32 has at most 10 digits; int() raises past 4,300


def fnv1_32(text: str) -> int:
    """The 32-bit FNV-1 hash (Go's ``hash/fnv`` ``New32``, not FNV-1a) of ``text``'s UTF-8 bytes."""
    value = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        value = (value * _FNV_PRIME) & _UINT32
        value ^= byte
    return value


def _uniform_hash(text: str) -> int:
    """A 64-bit hash that is uniform whatever the names look like, and stable across runs and hosts."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _parse_ordinal(suffix: str) -> int | None:
    if not _ORDINAL.fullmatch(suffix):
        return None
    number = int(suffix)
    return number if number <= _UINT32 else None


@dataclasses.dataclass(frozen=True)
class ClaimName:
    """A claim name split the way the zone choosers read it."""

    name: str
    """The claim (PVC) name as given."""
    ordinal: int | None
    """The trailing ``-<n>`` StatefulSet ordinal, or None when the name has none."""
    kubernetes_key: str
    """What Kubernetes hashes: the last dash-token before the ordinal, or the whole name."""
    balanced_key: str
    """What balanced mode hashes: the StatefulSet name (given or inferred), or the whole name."""

    @property
    def index(self) -> int:
        """The ordinal, or 0 for a name without one."""
        return self.ordinal or 0


def parse_claim_name(pvc_name: str, *, statefulset: str | None = None) -> ClaimName:
    """Split ``pvc_name`` into ordinal and hash keys (``getPVCNameHashAndIndexOffset`` for Kubernetes).

    ``statefulset`` names the claim's StatefulSet when the caller knows it; the name must then be
    ``<template>-<statefulset>-<ordinal>``, else `ConfigError`.
    """
    head, dash, suffix = pvc_name.rpartition("-")
    ordinal = _parse_ordinal(suffix) if dash else None
    if statefulset is not None:
        if ordinal is None or not head.endswith("-" + statefulset) or len(head) == len(statefulset) + 1:
            raise errors.ConfigError(
                f"claim {pvc_name!r} is not named <template>-{statefulset}-<ordinal>, "
                f"so it is not a claim of StatefulSet {statefulset!r}"
            )
        return ClaimName(pvc_name, ordinal, head.rpartition("-")[2], statefulset)
    if ordinal is None:
        return ClaimName(pvc_name, None, pvc_name, pvc_name)
    # Kubernetes keeps only the token after the last dash of "<template>-<statefulset>".
    kubernetes_key = head.rpartition("-")[2]
    template, dash, rest = head.partition("-")
    return ClaimName(pvc_name, ordinal, kubernetes_key, rest if dash else template)


def kubernetes_hash(pvc_name: str) -> tuple[int, int]:
    """Kubernetes' ``getPVCNameHashAndIndexOffset``: (FNV-1 hash of the key, ordinal or 0)."""
    claim = parse_claim_name(pvc_name)
    return fnv1_32(claim.kubernetes_key), claim.index


def kubernetes_zones(zones: Iterable[str], pvc_name: str, count: int = 1) -> set[str]:
    """Exactly Kubernetes' ``ChooseZonesForVolume``: ``count`` consecutive zones from a hashed start.

    Zones are sorted; arithmetic wraps at 2^32 before the modulo, as in Go (so a huge ordinal can
    even yield no zone); asking for more zones than exist returns every zone; no zones → an empty set.
    """
    ordered = sorted(set(zones))
    if not ordered or count <= 0:
        return set()
    hash_value, index = kubernetes_hash(pvc_name)
    start = (index * count) & _UINT32
    # Go loops `for i := start; i < start+count; i++` in uint32: when start+count wraps, the loop
    # does not run at all and Kubernetes returns no zone.
    end = (start + count) & _UINT32
    return {ordered[((hash_value + position) & _UINT32) % len(ordered)] for position in range(start, end)}


def kubernetes_zone(zones: Iterable[str], pvc_name: str) -> str:
    """Kubernetes' single-zone ``ChooseZoneForVolume``; `NoZonedNodes` when there is no zone (Go panics)."""
    chosen = kubernetes_zones(zones, pvc_name, 1)
    if not chosen:
        raise errors.NoZonedNodes(f"no zone to choose from for claim {pvc_name!r}")
    return chosen.pop()


def balanced_hash(pvc_name: str, *, statefulset: str | None = None) -> tuple[int, int]:
    """Balanced mode's (hash of the StatefulSet name, ordinal or 0); see the module docstring."""
    claim = parse_claim_name(pvc_name, statefulset=statefulset)
    return _uniform_hash(claim.balanced_key), claim.index


def balanced_zones(zones: Iterable[str], pvc_name: str, count: int = 1, *,
                   statefulset: str | None = None) -> list[str]:
    """Balanced mode: ``count`` distinct zones, the starting zone first (see the module docstring).

    Asking for more zones than exist returns every zone once; no zones → ``[]``.
    """
    ordered = sorted(set(zones))
    if not ordered or count <= 0:
        return []
    hash_value, index = balanced_hash(pvc_name, statefulset=statefulset)
    # Unbounded integers: no uint32 wrap, so consecutive ordinals never share a start.
    start = hash_value + index * count
    chosen: list[str] = []
    for step in range(min(count, len(ordered))):
        chosen.append(ordered[(start + step) % len(ordered)])
    return chosen
