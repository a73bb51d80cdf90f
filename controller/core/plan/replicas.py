"""Autoscaling write-back: a pool whose module manages its group's size (the MachinePool
carries valid cluster-autoscaler min/max annotations, so the module gets
`autoscaling.enabled`) claims `cluster.x-k8s.io/replicas-managed-by` on its MachinePool
and copies the replicas the module last observed to `MachinePool.spec.replicas`, so
Cluster API and the cluster-autoscaler see the real size.

The patch is guarded: it carries the MachinePool's resourceVersion as read, so a change
made meanwhile (the autoscaler's own) fails it with a conflict and the next pass decides
again from the newer object. A claim someone else made (another value of the annotation)
is left alone and nothing is written; CAPTF's own claim is withdrawn when autoscaling is
turned off, and the MachinePool's replicas are then the user's again (a change to them
is an apply, as before). Pure: io carries the patch out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.core.basics.names import POOL
from controller.core.contract.outputs import Pending, PoolOutputs, Valid
from controller.core.contract.roles import Role
from controller.core.contract.sources import autoscaling_of
from controller.core.decide import pause
from controller.core.decide.context import Context
from controller.core.plan.writeback import outputs_of
from controller.core.spec.refs import owner_of
from runtime.jsonobj import Json

ANN_REPLICAS_MANAGED_BY: Final = "cluster.x-k8s.io/replicas-managed-by"
MANAGER: Final = "captf"
WRITTEN: Final = "ReplicasWrittenBack"


@dataclass(frozen=True)
class PoolPatch:
    machine_pool: str
    patch: Json  # a merge patch with metadata.resourceVersion: the guard
    message: str
    replicas: int | None  # what is written; None: only the claim withdrawn


def pool_patch(ctx: Context) -> PoolPatch | None:
    snap = ctx.snap
    if snap.kind != POOL or snap.deleting or pause.pause_of(snap) is not None:
        return None
    owner = owner_of(snap.obj)
    pool = snap.related.get(owner) if owner is not None else None
    if owner is None or pool is None:
        return None
    meta = pool.get("metadata") or {}
    claim = (meta.get("annotations") or {}).get(ANN_REPLICAS_MANAGED_BY)
    version = str(meta.get("resourceVersion") or "")
    if not autoscaling_of(pool).enabled:
        if claim != MANAGER:
            return None
        patch = _guarded({"metadata": {"annotations": {ANN_REPLICAS_MANAGED_BY: None}}}, version)
        return PoolPatch(owner.name, patch, "autoscaling is off: the replicas are the user's", None)
    observed = _observed(ctx)
    if observed is None or claim not in (None, MANAGER):
        return None
    if claim == MANAGER and (pool.get("spec") or {}).get("replicas") == observed:
        return None
    patch = _guarded(
        {
            "metadata": {"annotations": {ANN_REPLICAS_MANAGED_BY: MANAGER}},
            "spec": {"replicas": observed},
        },
        version,
    )
    message = f"the module observed {observed} replicas: MachinePool {owner.name} spec.replicas set"
    return PoolPatch(owner.name, patch, message, observed)


def _observed(ctx: Context) -> int | None:
    decoded = outputs_of(ctx, Role.MACHINEPOOL)
    outputs = decoded.outputs if isinstance(decoded, Valid | Pending) else None
    return outputs.replicas if isinstance(outputs, PoolOutputs) else None


def _guarded(patch: Json, version: str) -> Json:
    if version:
        patch["metadata"]["resourceVersion"] = version
    return patch
