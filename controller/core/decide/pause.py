"""When Cluster API says "not now" or "not yours": pause, move, external management, and
the order of deletion.

These steps come before `deleting` in DecideOp, because each can forbid a destroy:

- a deletion marked by clusterctl move (`delete-for-move`) is a move: the finalizer goes,
  the infrastructure, state, inputs and backups stay, and the object lives on in the
  target cluster. Checked first of all (after a running Job is awaited): it never starts
  a Job, so it cannot destroy what moved;
- a paused object (its Cluster's spec.paused, or the paused annotation on the object)
  starts no Job, a destroy included: move pauses the Cluster before it deletes anything,
  so a controller that looked at the deletion first would destroy live infrastructure.
  Finished Jobs are still accounted (the plan's bookkeeping, before any step);
- a TerraformCluster marked externally managed is left alone: no Job ever, and when it is
  deleted the finalizer goes without a destroy;
- a deleting TerraformCluster waits while any machine or pool of its Cluster exists:
  Cluster API deletes machines before the cluster, their destroy may need what the
  cluster's module made, and a Retain the members inherit must outlive them."""

from __future__ import annotations

from collections import Counter
from typing import Final

from controller.core.basics.names import (
    ANN_DELETE_FOR_MOVE,
    ANN_EXTERNALLY_MANAGED,
    ANN_PAUSED,
    CAPI_CLUSTER,
    CLUSTER,
    FINALIZER,
    MACHINE,
    POOL,
    Op,
    Reason,
)
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Idle, Requeue
from controller.core.decide.owners import OWNER_WAIT, capi_cluster, members
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import Outcome

# Unpausing changes the Cluster or the object, and either wakes the object.
PAUSE_WAIT: Final = 600.0


def pause_of(snap: Snapshot) -> str | None:
    """Why the object is paused, or None: the paused annotation on it, or its Cluster's
    spec.paused."""
    if ANN_PAUSED in snap.annotations:
        return f"annotation {ANN_PAUSED} is set"
    cluster = capi_cluster(snap)
    if cluster is not None and (cluster.get("spec") or {}).get("paused") is True:
        return f"{CAPI_CLUSTER} {cluster['metadata']['name']} is paused"
    return None


def _deleting(snap: Snapshot) -> bool:
    return bool(snap.obj.get("metadata", {}).get("deletionTimestamp"))


def moved(ctx: Context) -> Decision | None:
    if not (_deleting(ctx.snap) and ANN_DELETE_FOR_MOVE in ctx.snap.annotations):
        return None
    message = "deleted by clusterctl move: infrastructure, state and inputs kept"
    return Idle(None, Reason.MOVED, message)


def paused(ctx: Context) -> Decision | None:
    why = pause_of(ctx.snap)
    if why is None:
        return None
    return Requeue(Reason.PAUSED, PAUSE_WAIT, message=f"{why}; no Job starts")


def externally_managed(ctx: Context) -> Decision | None:
    snap = ctx.snap
    manager = snap.annotations.get(ANN_EXTERNALLY_MANAGED)
    if snap.kind != CLUSTER or manager is None:
        return None
    message = f"{ANN_EXTERNALLY_MANAGED}={manager}: the infrastructure is managed elsewhere"
    return Idle(None, Reason.EXTERNALLY_MANAGED, message)


def deletion_blocked(ctx: Context) -> Decision | None:
    """A deleting TerraformCluster holds on while its Cluster's machines and pools exist,
    whatever its deletionPolicy. A destroy may need what the cluster's module made; and
    a Retain must wait too: members without a policy of their own inherit the cluster's,
    and a member whose cluster is gone is deleted as Delete, so letting go first would
    turn the members' Retain into destroys. A deletion without the finalizer holds
    nothing, so it need not wait."""
    snap = ctx.snap
    meta = snap.obj.get("metadata", {})
    if not _deleting(snap) or FINALIZER not in (meta.get("finalizers") or []):
        return None
    last = ctx.history.newest(Op.DESTROY)
    remaining = members(snap)
    if not remaining or (last is not None and last.outcome == Outcome.SUCCESS):
        return None
    counts = Counter(ref.kind for ref in remaining)
    each = ", ".join(f"{counts[kind]} {kind}" for kind in (MACHINE, POOL) if counts[kind])
    message = f"waiting for the machines and pools of this cluster to be deleted: {each} remain"
    return Requeue(Reason.DELETION_BLOCKED, OWNER_WAIT, message=message)
