"""One pass over one object, as data: everything a reconcile does, decided at once.

`plan_pass(snap, now, settings=, facts=)` reads its three inputs (the Snapshot: what the
cluster shows; the Settings: the operator's flags; the Facts: this process's memory
and live reads) and the time, and returns the Plan: the finished Jobs to account
(each with its Event, its metric sample and the Leases it frees), the Job that
disappeared while it ran, the Jobs to prune, the Job to create (with its inputs
Secret and its Leases, labelled for the shard), the contract's spec write-back
(a module's endpoint or provider ids), the status, the metadata patch (the
retry-capped label, the block-move annotation), the finalizer, the Events (a refused
create's Warning among them), and when to come back. The policy and inputs are read
once (`read_spec`) into the one decision context of the pass; `decide_in` is its
decision part, on the snapshot as the pass's bookkeeping leaves it. Pure: io carries
the plan out, in the order controller/io/reconciler.py writes down."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime

from controller.core.basics.names import (
    ANN_BLOCK_MOVE,
    ANN_RESTORE_SERIAL,
    FINALIZER,
    LABEL_RETRY_CAPPED,
    Reason,
)
from controller.core.basics.serials import RESTORE_SERIAL_INVALID
from controller.core.decide import pinning, remediation, runner_rbac
from controller.core.decide.context import Context, Reading
from controller.core.decide.decision import Decision, Idle, Requeue, Run
from controller.core.decide.facts import NO_FACTS, Facts
from controller.core.decide.remediation import OwnerMark
from controller.core.decide.runner_rbac import Verdict
from controller.core.decide.settings import Settings
from controller.core.decide.snapshot import Snapshot
from controller.core.decide.steps import to_end
from controller.core.jobs import backoff, retention, starting
from controller.core.jobs.job import name_of
from controller.core.jobs.termination import Recorded, recordings
from controller.core.plan import (
    keeping,
    plan_objects,
    replicas,
    signals,
    status,
    writeback,
)
from controller.core.plan.accounting import (
    Accounting,
    Event,
)
from controller.core.plan.books import restore_tried
from controller.core.plan.decided import decided
from controller.core.plan.interrupted import Gone
from controller.core.plan.keeping import SecretPatch
from controller.core.plan.launching import (
    Launch,
    launch_of,
    refusal_event,
)
from controller.core.plan.plan_objects import NO_WRITES, PlanWrites
from controller.core.plan.pool_capacity import pool_capacity, pool_capacity_event
from controller.core.plan.replicas import PoolPatch
from controller.core.spec.image import ImageLookup
from controller.core.spec.policy import Policy
from runtime.jsonobj import Json

# The object may go: destroyed, retained by its deletionPolicy, nothing to destroy,
# abandoned by uid (controller/core/decide/deletion.py), moved by clusterctl, or managed
# elsewhere (controller/core/decide/pause.py). Only a deletion lets go: an externally
# managed object that is not being deleted keeps its finalizer.
_LET_GO = frozenset(
    {
        Reason.DESTROYED,
        Reason.RETAINED,
        Reason.DELETING_WITHOUT_STATE,
        Reason.ABANDONED,
        Reason.MOVED,
        Reason.EXTERNALLY_MANAGED,
    }
)
# After starting a Job: the Job watch wakes the reconcile; this is only the fallback.
RUNNING_RECHECK = 60.0


@dataclass(frozen=True)
class Plan:
    decision: Decision
    add_finalizer: bool = False
    # The results read from finished Jobs' pods, recorded on the Jobs before the
    # accounting: once a Job is accounted, its annotation is the only record left.
    results: tuple[Recorded, ...] = ()
    # Running Jobs that cannot start, past their grace: each gets its failed result and
    # a one-second deadline, so the Job controller fails it (controller/core/jobs/starting.py).
    end_jobs: tuple[Recorded, ...] = ()
    restore_tried: Json | None = None  # a status patch written before the accounting
    accounts: tuple[Accounting, ...] = ()
    gone: Gone | None = None
    prune: tuple[str, ...] = ()
    # Labels and owners of the state, backups and inputs: a Retain, an adoption.
    secret_patches: tuple[SecretPatch, ...] = ()
    # The runner's ServiceAccount and RoleBinding to create before the launch's Job
    # (controller/core/decide/runner_rbac.py): only in a pass that launches one.
    runner_rbac: tuple[Json, ...] = ()
    launch: Launch | None = None
    # The object's TerraformPlans: the one a waiting Job gets, their status, the finished
    # ones pruned (controller/core/plan/plan_objects.py).
    plan_writes: PlanWrites = NO_WRITES
    # The contract's spec write-back (controller/core/plan/writeback.py): a merge patch of
    # the object carrying only those fields; None: nothing to write.
    spec_patch: Json | None = None
    status: Json | None = None  # a merge patch of status; None: unchanged
    # A merge patch of metadata: the retry-capped label, the block-move annotation; None:
    # unchanged. Only CAPTF's own keys, so it can never undo anyone else's.
    metadata: Json | None = None
    events: tuple[Event, ...] = ()
    # The events carry the Warning of the object's refusal streak: once they are recorded,
    # the process remembers the streak as announced (one Warning per streak).
    announces_refusal: bool = False
    remove_finalizer: bool = False
    requeue: float | None = None  # seconds; None: done until something changes
    # A registry lookup the Job needs first: this plan waits ImageResolving and starts
    # nothing; io makes the lookup as its last step and hands the answer to the next pass
    # in the Facts (controller/core/decide/pinning.py).
    image_lookup: ImageLookup | None = None
    # Remediation through Cluster API (controller/core/decide/remediation.py): a merge
    # patch of the owner Machine's two annotations; None: nothing to write.
    owner_mark: OwnerMark | None = None
    # Autoscaling write-back (controller/core/plan/replicas.py): a guarded merge patch of
    # the owner MachinePool; None: nothing to write.
    pool_patch: PoolPatch | None = None


def live_check_needed(snap: Snapshot, pending: frozenset[str]) -> str | None:
    """The Job io must look up live before planning: status.activeJob names a Job the cache
    does not show and this process is not creating (`pending`). Only live reads tell a
    cache that is behind from a Job that is gone (the Job NotFound, and the live status
    still naming it)."""
    active = snap.status.get("activeJob")
    if not active or active in snap.job_names() or active in pending:
        return None
    return str(active)


def plan_pass(
    snap: Snapshot,
    now: datetime,
    *,
    settings: Settings | None = None,
    facts: Facts = NO_FACTS,
) -> Plan:
    settings = settings or Settings()
    part = decided(snap, now, settings, facts)
    reading, decision, ctx, books, todo = (
        part.reading,
        part.decision,
        part.ctx,
        part.books,
        part.todo,
    )
    policy = reading.policy
    rbac = _runner_verdict(ctx, snap, policy, facts)
    launch = launch_of(ctx, decision) if ctx is not None and isinstance(decision, Run) else None
    lookup = _lookup(ctx, decision)
    if launch is not None and ctx is not None:
        books = _with_status(books, books.status | {"activeJob": launch.name})
        ctx = ctx.on(books)
    contract = writeback.write_back(ctx) if ctx is not None else None
    runner_condition = rbac.condition() if rbac is not None else None
    image = pinning.condition(
        snap,
        reading.inputs,
        facts.image,
        _wait_of(reading, decision),
        resolving=lookup is not None,
    )
    desired = status.desired(
        books,
        decision,
        ctx,
        now,
        writeback=contract,
        runner=runner_condition,
        image_condition=image,
        capacity=pool_capacity(snap.obj, facts.image),
    )
    tried = restore_tried(snap, todo)
    stored = snap.status | (tried or {})
    meta = snap.obj.get("metadata", {})
    deleted = bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")
    refused = refusal_event(facts.refusal)
    contract_spec = None if contract is None else contract.spec
    mark = remediation.owner_mark(ctx) if ctx is not None else None
    sized = replicas.pool_patch(ctx) if ctx is not None and not deleted else None
    return Plan(
        decision=decision,
        add_finalizer=not meta.get("deletionTimestamp") and FINALIZER not in _finalizers(snap),
        results=recordings(snap.jobs, facts.results, snap.redactor),
        end_jobs=_end_jobs(ctx, decision),
        restore_tried=tried,
        accounts=part.accounts,
        gone=part.gone,
        prune=_prune(snap, books, policy, plan_objects.active_jobs(ctx) | _counted(ctx)),
        secret_patches=keeping.patches_of(ctx, decision),
        runner_rbac=rbac.creates if rbac is not None and launch is not None else (),
        launch=launch,
        plan_writes=plan_objects.writes_of(ctx, settings.kept_plans),
        spec_patch=None if deleted else contract_spec,
        status=None if deleted else status.merge_patch(stored, desired),
        metadata=_metadata(books, policy),
        events=(
            refused
            + _restore_event(books, snap.status)
            + _capped_event(books, policy, now)
            + keeping.events_of(ctx, decision)
            + signals.events(snap, decision, stored, desired, None if deleted else contract_spec)
            + signals.mark_event(snap, mark)
            + signals.sized_event(snap, sized)
            + (() if deleted else pool_capacity_event(snap.obj, stored, desired))
        ),
        owner_mark=mark,
        pool_patch=sized,
        announces_refusal=bool(refused),
        remove_finalizer=bool(meta.get("deletionTimestamp"))
        and isinstance(decision, Idle)
        and decision.reason in _LET_GO,
        requeue=requeue_of(decision),
        image_lookup=lookup,
    )


def _counted(ctx: Context | None) -> frozenset[str]:
    """The readings the remediation mark counts (remediation.readings_kept): they stay."""
    return remediation.readings_kept(ctx) if ctx is not None else frozenset()


def _lookup(ctx: Context | None, decision: Decision) -> ImageLookup | None:
    """The registry lookup io makes as a step of this pass, for the next: the one the
    decision waits for (the guard `image`, decide/guards.py)."""
    image = ctx.inputs.image if ctx is not None else None
    if ctx is None or image is None or not isinstance(decision, Requeue):
        return None
    if decision.reason != Reason.IMAGE_RESOLVING:
        return None
    return ImageLookup(image.reference, ctx.snap.namespace, ctx.policy.service_account)


def _wait_of(reading: Reading, decision: Decision) -> Requeue | None:
    """The wait the inputs reading imposed, as decided (an image lookup's failure)."""
    return decision if reading.wait is not None and isinstance(decision, Requeue) else None


def _runner_verdict(
    ctx: Context | None, snap: Snapshot, policy: Policy | None, facts: Facts
) -> Verdict | None:
    """The runner RBAC of the object's account: the decision context's, which the guard
    `runner_rbac` read (once per pass); without a context (the inputs cannot be read) of
    the policy alone. None when the policy cannot be read or nothing was read of the
    namespace's RBAC (`captf decide` from a file)."""
    if ctx is not None:
        return ctx.runner_verdict
    if policy is None or facts.runner is None:
        return None
    return runner_rbac.verdict(snap.namespace, policy.service_account, facts.runner)


_CANNOT_START = frozenset({Reason.JOB_CANNOT_START, Reason.IMAGE_PULL_BACK_OFF})


def _end_jobs(ctx: Context | None, decision: Decision) -> tuple[Recorded, ...]:
    """The Job a pass that waits on a Job that cannot start ends, once its grace passed."""
    if ctx is None or not isinstance(decision, Requeue) or decision.reason not in _CANNOT_START:
        return ()
    found = to_end(ctx)
    if found is None:
        return ()
    job, stuck = found
    value = starting.ended_result(job, stuck, ctx.snap.redactor(job))
    return (Recorded(name_of(job), str(job.get("metadata", {}).get("uid", "")), value),)


def requeue_of(decision: Decision) -> float | None:
    match decision:
        case Run():
            return RUNNING_RECHECK
        case Requeue(after=after):
            return max(after, 0.0)
        case Idle(after=after):
            return None if after is None or decision.reason in _LET_GO else max(after, 0)


def _finalizers(snap: Snapshot) -> list[str]:
    return list(snap.obj.get("metadata", {}).get("finalizers") or [])


def _with_status(snap: Snapshot, new: Json) -> Snapshot:
    return replace(snap, obj=snap.obj | {"status": new})


def _prune(
    snap: Snapshot, books: Snapshot, policy: Policy | None, planned: frozenset[str]
) -> tuple[str, ...]:
    """Accounted Jobs past the limits. The active Job (before and after this pass), the
    Jobs of TerraformPlans not finished and the readings the remediation mark counts
    (`planned`) always stay."""
    if policy is None:
        return ()
    active = [snap.status.get("activeJob"), books.status.get("activeJob")]
    keep = frozenset(filter(None, active)) | planned
    history = books.history
    doomed = retention.prune(
        history,
        failed_limit=policy.failed_limit,
        successful_limit=policy.successful_limit,
        keep=keep,
    )
    return tuple(doomed)


def _metadata(books: Snapshot, policy: Policy | None) -> Json | None:
    """The metadata merge patch of the pass, or None when nothing changes."""
    patch: Json = {}
    labels = _capped_label(books, policy)
    if labels is not None:
        patch["labels"] = labels
    notes = _block_move(books)
    if notes is not None:
        patch["annotations"] = notes
    return patch or None


def _block_move(books: Snapshot) -> Json | None:
    """`clusterctl.cluster.x-k8s.io/block-move` while a Job of the object runs (the books'
    activeJob, a Job launched by this pass included): clusterctl move waits for it to go,
    so a moved object never leaves a Job behind."""
    wanted = "true" if books.status.get("activeJob") else None
    current = books.annotations.get(ANN_BLOCK_MOVE)
    return None if current == wanted else {ANN_BLOCK_MOVE: wanted}


def _capped_label(snap: Snapshot, policy: Policy | None) -> Json | None:
    """The `captf.io/retry-capped=<op>` label while an op's failures are at the limit."""
    if policy is None:
        return None
    capped = backoff.capped(snap.history, policy.failed_limit)
    current = (snap.obj.get("metadata", {}).get("labels") or {}).get(LABEL_RETRY_CAPPED)
    wanted = capped.op if capped else None
    return None if current == wanted else {LABEL_RETRY_CAPPED: wanted}


def _capped_event(snap: Snapshot, policy: Policy | None, now: datetime) -> tuple[Event, ...]:
    """One RetryCapped Warning per streak, named after the Job that reached the cap."""
    if policy is None:
        return ()
    history = snap.history
    capped = backoff.capped(history, policy.failed_limit)
    current = (snap.obj.get("metadata", {}).get("labels") or {}).get(LABEL_RETRY_CAPPED)
    if capped is None or current == capped.op:
        return ()
    message = (
        f"{capped.op} failed {len(history.failures(capped.op))} times in a row; "
        f"retrying every 10m until it succeeds"
    )
    return (Event(f"{capped.reached_by}.retrycapped", "Warning", "RetryCapped", message),)


def _restore_event(snap: Snapshot, stored: Json) -> tuple[Event, ...]:
    """One Warning for a restore annotation that names no serial, before the status write
    that shows it: once written, later passes see it there and stay quiet. The Event's name
    is fixed by the object and the text, so a retried pass, or another replica, cannot
    record it twice."""
    warning = status.restore_warning(stored, snap)
    if warning is None:
        return ()
    text = f"{snap.obj['metadata'].get('uid', '')}/{snap.annotations[ANN_RESTORE_SERIAL]}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    name = f"{snap.name[:200]}.restoreserial.{digest}"
    return (Event(name, "Warning", RESTORE_SERIAL_INVALID, warning),)
