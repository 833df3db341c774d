"""What the provisioner service reads from claims and volumes, and the decisions that need no I/O.

The names follow sig-storage-lib-external-provisioner, so a cluster that ran the CSI
external-provisioner reads the same way: a claim is ours when its ``storage-provisioner``
annotation (GA or beta) names us; WaitForFirstConsumer claims wait for the scheduler's
``selected-node``; a PV we made carries ``pv.kubernetes.io/provisioned-by`` and, under the
``Delete`` policy, the deletion-protection finalizer, which we remove only once its disk is gone.
Projections keep the informers' caches small and stop status-only updates from waking workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from storageclass import parameters, rules

ANN_STORAGE_PROVISIONER: Final = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER: Final = "volume.beta.kubernetes.io/storage-provisioner"
ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
ANN_PROVISIONED_BY: Final = "pv.kubernetes.io/provisioned-by"
FINALIZER: Final = "external-provisioner.volume.kubernetes.io/finalizer"
"""The finalizer external-provisioner puts on PVs whose disk it must delete (HonorPVReclaimPolicy)."""

NODE_DEPENDENT_RULES: Final = frozenset({rules.Rule.SELECTED_NODE.value, rules.Rule.UNZONED_DISK_ON_ZONED_NODE.value})
"""Refusals that another node could avoid: the selected-node annotation is removed so the scheduler picks again."""


def claim_key(namespace: str, name: str) -> str:
    """The work-queue key of a claim."""
    return f"claim/{namespace}/{name}"


def volume_key(name: str) -> str:
    """The work-queue key of a PersistentVolume."""
    return f"volume/{name}"


def project_claim(pvc: Mapping[str, Any]) -> dict[str, Any]:
    """What the provisioner reads of a claim (status conditions and managed fields dropped)."""
    meta = pvc.get("metadata") or {}
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {key: meta[key] for key in ("name", "namespace", "uid", "annotations", "ownerReferences",
                                                 "deletionTimestamp") if meta.get(key)},
        "spec": dict(pvc.get("spec") or {}),
        "status": {"phase": (pvc.get("status") or {}).get("phase", "")},
    }


def project_volume(pv: Mapping[str, Any]) -> dict[str, Any]:
    """What the provisioner reads of a PV: identity, our annotation, finalizers, policy, claim, disk, phase."""
    meta, spec = pv.get("metadata") or {}, pv.get("spec") or {}
    annotations = meta.get("annotations") or {}
    projected_meta: dict[str, Any] = {key: meta[key] for key in ("name", "finalizers", "deletionTimestamp")
                                      if meta.get(key)}
    if ANN_PROVISIONED_BY in annotations:
        projected_meta["annotations"] = {ANN_PROVISIONED_BY: annotations[ANN_PROVISIONED_BY]}
    projected_spec = {key: spec[key] for key in ("persistentVolumeReclaimPolicy", "claimRef", "azureDisk", "csi")
                      if key in spec}
    return {"metadata": projected_meta, "spec": projected_spec,
            "status": {"phase": (pv.get("status") or {}).get("phase", "")}}


def project_class(storage_class: Mapping[str, Any]) -> dict[str, Any]:
    """A StorageClass without its managed fields (the rules read everything else)."""
    meta = dict(storage_class.get("metadata") or {})
    meta.pop("managedFields", None)
    return {**storage_class, "metadata": meta}


@dataclasses.dataclass(frozen=True)
class Claim:
    """The facts of one claim the provisioner decides on."""

    namespace: str
    name: str
    uid: str
    provisioner: str
    """Its ``storage-provisioner`` annotation (GA, else beta), ``""`` when unset."""
    storage_class: str
    selected_node: str
    bound: bool
    """Already has a volume (``spec.volumeName``), is Bound, or is being deleted: nothing to do."""
    unsupported: str
    """Why we cannot provision it whatever the class says (a selector, a data source), else ``""``."""

    @property
    def volume_name(self) -> str:
        """The PV (and disk) name external-provisioner uses: ``pvc-<uid>``."""
        return f"pvc-{self.uid}"

    @classmethod
    def of(cls, pvc: Mapping[str, Any]) -> Claim:
        """Read a (projected) claim manifest."""
        meta, spec = pvc.get("metadata") or {}, pvc.get("spec") or {}
        annotations = meta.get("annotations") or {}
        unsupported = ""
        if spec.get("selector"):
            unsupported = "claims with a selector cannot be provisioned (a selector asks for an existing volume)"
        elif spec.get("dataSource") or spec.get("dataSourceRef"):
            source = spec.get("dataSourceRef") or spec.get("dataSource") or {}
            unsupported = (f"claims with a data source ({source.get('kind', '?')} {source.get('name', '?')!r}) "
                           "cannot be provisioned: snapshots and clones are not supported")
        return cls(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
                   uid=str(meta.get("uid") or ""),
                   provisioner=str(annotations.get(ANN_STORAGE_PROVISIONER)
                                   or annotations.get(ANN_BETA_STORAGE_PROVISIONER) or ""),
                   storage_class=str(spec.get("storageClassName") or ""),
                   selected_node=str(annotations.get(ANN_SELECTED_NODE) or ""),
                   bound=bool(spec.get("volumeName")) or (pvc.get("status") or {}).get("phase") in ("Bound", "Lost")
                   or bool(meta.get("deletionTimestamp")),
                   unsupported=unsupported)


def wants_provisioning(pvc: Mapping[str, Any], name: str) -> bool:
    """Whether the claim is ours and still needs a volume (the informer's filter for the work queue)."""
    claim = Claim.of(pvc)
    return claim.provisioner == name and not claim.bound


def waits_for_consumer(storage_class: Mapping[str, Any]) -> bool:
    """The class binds at the first consumer (WaitForFirstConsumer)."""
    return storage_class.get("volumeBindingMode") == parameters.WAIT_FOR_FIRST_CONSUMER


def decorate_volume(pv: dict[str, Any], *, provisioner: str) -> dict[str, Any]:
    """Mark a PV as ours: ``provisioned-by`` our name, and the finalizer when its disk is ours to delete."""
    meta = pv.setdefault("metadata", {})
    meta.setdefault("annotations", {})[ANN_PROVISIONED_BY] = provisioner
    if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy", "Delete") == "Delete":
        meta["finalizers"] = [FINALIZER]
    return pv


@dataclasses.dataclass(frozen=True)
class VolumeAction:
    """What to do with one of our PVs: delete its disk, and/or let the PV object go."""

    delete_disk: bool
    remove_finalizer: bool
    delete_object: bool

    @property
    def nothing(self) -> bool:
        """Nothing to do."""
        return not (self.delete_disk or self.remove_finalizer or self.delete_object)


def volume_action(pv: Mapping[str, Any], provisioner: str) -> VolumeAction:
    """What a (projected) PV needs from us, as external-provisioner decides it.

    Ours and Released (its claim is gone) or deleted while not Bound: under ``Delete`` the disk
    goes, then the finalizer, then the object (unless already being deleted); under ``Retain`` the
    disk is never touched and only our finalizer is lifted when someone deletes the object.
    """
    meta, spec = pv.get("metadata") or {}, pv.get("spec") or {}
    if (meta.get("annotations") or {}).get(ANN_PROVISIONED_BY) != provisioner:
        return VolumeAction(False, False, False)
    phase = (pv.get("status") or {}).get("phase", "")
    deleting = bool(meta.get("deletionTimestamp"))
    released = phase in ("Released", "Failed") or (deleting and phase != "Bound")
    if not released:
        return VolumeAction(False, False, False)
    has_finalizer = FINALIZER in (meta.get("finalizers") or [])
    if spec.get("persistentVolumeReclaimPolicy", "Delete") != "Delete":
        return VolumeAction(False, has_finalizer and deleting, False)
    if deleting and not has_finalizer:
        return VolumeAction(False, False, False)  # our part is done; other finalizers hold it
    return VolumeAction(True, has_finalizer, not deleting)


def finalizer_removal(pv: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """A JSON patch removing our finalizer, guarded by a ``test`` of its position; None when absent."""
    finalizers = list((pv.get("metadata") or {}).get("finalizers") or [])
    if FINALIZER not in finalizers:
        return None
    path = f"/metadata/finalizers/{finalizers.index(FINALIZER)}"
    return [{"op": "test", "path": path, "value": FINALIZER}, {"op": "remove", "path": path}]
