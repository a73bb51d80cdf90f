"""Writes to the pool's MachinePool (contract/sizing.py says who sizes the group):

- while the cloud sizes it (the user's `cluster.x-k8s.io/replicas-managed-by` and valid
  autoscaler bounds), the replicas the module last observed go to
  `MachinePool.spec.replicas`, so Cluster API and the cluster-autoscaler see the real
  size. Only spec.replicas: the annotation is the user's, never ours to set;
- CAPTF's own old claim (`replicas-managed-by: captf`, written before issue 37 and
  recognised by who wrote it) is withdrawn, so spec.replicas is the size again and the
  cluster-autoscaler's `/scale` holds.

Without the user's annotation nothing is written: spec.replicas is the desired size, and
a change to it is an apply. Each patch is guarded: it carries the MachinePool's
resourceVersion as read, so a change made meanwhile (the autoscaler's own) fails it with
a conflict and the next pass decides again from the newer object. Pure: io carries the
patch out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.core.basics.names import POOL
from controller.core.contract.outputs import Pending, PoolOutputs, Valid
from controller.core.contract.roles import Role
from controller.core.contract.sizing import OLD_CLAIM, REPLICAS_MANAGED_BY, autoscaling_of
from controller.core.decide import pause
from controller.core.decide.context import Context
from controller.core.plan.writeback import outputs_of
from controller.core.spec.refs import owner_of
from runtime.jsonobj import Json

WRITTEN: Final = "ReplicasWrittenBack"
WITHDRAWN: Final = "ReplicasClaimWithdrawn"


@dataclass(frozen=True)
class PoolPatch:
    machine_pool: str
    patch: Json  # a merge patch with metadata.resourceVersion: the guard
    message: str
    replicas: int | None  # what is written; None: only the old claim withdrawn


def pool_patch(ctx: Context) -> PoolPatch | None:
    snap = ctx.snap
    if snap.kind != POOL or snap.deleting or pause.pause_of(snap) is not None:
        return None
    owner = owner_of(snap.obj)
    pool = snap.related.get(owner) if owner is not None else None
    if owner is None or pool is None:
        return None
    version = str((pool.get("metadata") or {}).get("resourceVersion") or "")
    scaling = autoscaling_of(pool)
    if scaling.old_claim:
        patch = _guarded({"metadata": {"annotations": {REPLICAS_MANAGED_BY: None}}}, version)
        message = (
            f"{REPLICAS_MANAGED_BY}: {OLD_CLAIM}, which CAPTF wrote itself, withdrawn: "
            f"MachinePool {owner.name} spec.replicas is the size"
        )
        return PoolPatch(owner.name, patch, message, None)
    observed = _observed(ctx) if scaling.enabled else None
    if observed is None or (pool.get("spec") or {}).get("replicas") == observed:
        return None
    patch = _guarded({"spec": {"replicas": observed}}, version)
    message = f"the module observed {observed} replicas: MachinePool {owner.name} spec.replicas set"
    return PoolPatch(owner.name, patch, message, observed)


def _observed(ctx: Context) -> int | None:
    decoded = outputs_of(ctx, Role.MACHINEPOOL)
    outputs = decoded.outputs if isinstance(decoded, Valid | Pending) else None
    return outputs.replicas if isinstance(outputs, PoolOutputs) else None


def _guarded(patch: Json, version: str) -> Json:
    if version:
        patch.setdefault("metadata", {})["resourceVersion"] = version
    return patch
