"""Which watch events are worth a wake: controller-runtime's predicates.

Each takes an informer's event as (old, new), (None, new) for an add and (old, None)
for a delete, and answers from the two versions alone. Most of them tell the
controller's own writes apart from anyone else's: the pass that wrote a change already
decided with it, so its echo from the watch must not wake the object again."""

from __future__ import annotations

from controller.core import holder_of, is_finished, member_jobs, ready_of
from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_BLOCK_MOVE,
    ANN_RESULT,
    FINALIZER,
    LABEL_RETRY_CAPPED,
    LEASE_WAITS,
)
from runtime.cache.resource import Obj

# What the controller alone writes on a Job, in the pass that accounts it.
OWN_JOB_MARKS = frozenset({ANN_RESULT, ANN_ACCOUNTED})


def only_own_object_writes(old: Obj | None, new: Obj | None) -> bool:
    """Whether an update changed nothing but what the controller itself writes on a CAPTF
    object: status, its finalizer, the retry-capped label, the block-move annotation. Such
    an event must not wake the object again (the pass that wrote it already decided with
    it); any other change
    (spec, labels and annotations that are not ours, deletion, foreign finalizers, owner
    references) does."""
    if old is None or new is None:
        return False
    return _own_writes_aside(old) == _own_writes_aside(new)


def _own_writes_aside(obj: Obj) -> tuple[object, ...]:
    meta = obj["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != LABEL_RETRY_CAPPED}
    finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != ANN_BLOCK_MOVE}
    return (
        obj.get("spec"),
        meta.get("uid"),
        meta.get("deletionTimestamp"),
        notes,
        labels,
        finalizers,
        # Cluster API sets a member's owner (its Machine or MachinePool) after creating it:
        # a member that waited WaitingForOwner acts on that event, not on its next poll
        # or the owner's next change (issue 31: Machine -> Job took seconds).
        meta.get("ownerReferences"),
    )


def job_news(old: Obj | None, new: Obj | None) -> bool:
    """Whether a Job's event says anything a pass acts on: it came or went, it finished
    (or its end changed), someone else's label or annotation changed. Not the
    controller's own marks (`captf.io/result`, written in the pass that accounts the Job;
    `captf.io/accounted`), and not a running Job's progress (startTime, active, its
    counters): no decision reads them before the Job ends (issue 31: each woke the object
    for a pass that wrote nothing)."""
    if old is None or new is None:
        return True
    return _job_read(old) != _job_read(new)


def _job_read(job: Obj) -> tuple[object, ...]:
    meta = job["metadata"]
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in OWN_JOB_MARKS}
    status = job.get("status") if is_finished(job) else None
    return (status, meta.get("deletionTimestamp"), meta.get("labels") or {}, notes)


def only_plan_status(old: Obj | None, new: Obj | None) -> bool:
    """Whether a TerraformPlan update changed only its status, which the controller alone
    writes; a person's approval (spec), a deletion, or anything else does wake."""
    if old is None or new is None:
        return False
    return _status_aside(old) == _status_aside(new)


def _status_aside(obj: Obj) -> tuple[object, ...]:
    meta = obj["metadata"]
    return (obj.get("spec"), meta.get("uid"), meta.get("deletionTimestamp"), meta.get("labels"))


def only_capi_version(old: Obj | None, new: Obj | None) -> bool:
    """Whether a Cluster API object's update changed nothing a pass reads: as cached (the
    informer keeps what the core's `capi_read` leaves), the two versions differ in their
    resourceVersion at most. Cluster API's own status writes (conditions, counters, phase)
    are such updates."""
    if old is None or new is None:
        return False
    return _without_version(old) == _without_version(new)


def _without_version(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def seen_by_others(old: Obj | None, new: Obj | None) -> bool:
    """Whether what other objects wait on changed: its Ready condition (dependants and
    members wait for it), or whether it runs a Job (a cluster and its members never run
    one at the same time)."""
    return ready_of(old) != ready_of(new) or _active_job(old) != _active_job(new)


def cluster_news(old: Obj | None, new: Obj | None, cluster: Obj) -> bool:
    """Whether a member's change is news to its TerraformCluster, which reads its members
    only to wait for their Jobs and, while deleted, for them to go: the member went, or
    its activeJob changed while the cluster waits for a Lease.
    Not its Ready, which the cluster never reads (issue 31: each member's Ready and
    activeJob woke the cluster, four passes a Machine). A member's Job ending frees its
    operation Lease too, which wakes the cluster should its wait begin meanwhile."""
    if new is None:
        return True
    waits = next_reason(cluster) in LEASE_WAITS
    return waits and _active_job(old) != _active_job(new)


def next_reason(obj: Obj) -> str:
    """What its status says it waits for (status.next.reason), or ""."""
    return str(((obj.get("status") or {}).get("next") or {}).get("reason") or "")


def lease_freed(old: Obj | None, new: Obj | None) -> bool:
    """Whether a run slot or an operation came free: a holder left, or a member's entry
    on its cluster's operation Lease went."""
    gone = set(member_jobs(old)) - set(member_jobs(new))
    return bool(holder_of(old) and not holder_of(new)) or bool(gone)


def _active_job(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("activeJob") or "")
