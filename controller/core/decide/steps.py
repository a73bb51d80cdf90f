"""DecideOp: the one decision for an object, from a snapshot and the time.

Steps are checked in order and the first that applies wins; the order and the
reason names are part of the API. Pure: no I/O, no clock, no randomness."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from controller.core.basics.names import (
    ANN_ABANDON,
    ANN_ACCOUNTED,
    ANN_RESTORE_SERIAL,
    CLUSTER,
    MUTABLE_KINDS,
    Op,
    Reason,
    backoff_reason,
)
from controller.core.basics.serials import requested_serial
from controller.core.decide import (
    approval_waits,
    deletion,
    denials,
    owners,
    pause,
    triggers,
)
from controller.core.decide.context import Context, context_of
from controller.core.decide.decision import Decision, Idle, Requeue
from controller.core.decide.facts import NO_FACTS, Facts
from controller.core.decide.gates import NOT_READY_WAIT
from controller.core.decide.guards import run
from controller.core.decide.settings import Settings
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs import starting
from controller.core.jobs.job import (
    Outcome,
    annotations_of,
    is_finished,
    name_of,
)
from controller.core.spec.ready import is_ready as _is_ready
from controller.core.spec.refs import cluster_of, dependencies, local_credentials_of

# Requeue intervals of the waits, in seconds (the table "What does not back off").
CACHE_WAIT = 5.0
RUNNING_WAIT = 60.0  # the Job watch wakes the reconcile sooner
STATE_WAIT = 60.0
APPROVAL_WAIT = 600.0  # an approval (a TerraformPlan's change) wakes the reconcile sooner

Step = Callable[[Context], Decision | None]


def decide(
    snap: Snapshot, now: datetime, settings: Settings | None = None, facts: Facts = NO_FACTS
) -> Decision:
    """The decision of `captf decide` and of every test of DecideOp: nothing remembered,
    nothing read live, unless `facts` says otherwise."""
    return decide_in(context_of(snap, now, settings, facts))


def decide_in(ctx: Context | Requeue) -> Decision:
    """The decision in a context read once for the pass (the planner's), or its wait: the
    first step that applies. A step that finds an op due asks `guards.run`, whose guards
    (guards.py) turn it into their wait or a Run."""
    if isinstance(ctx, Requeue):
        return ctx
    for step in STEPS:
        decision = step(ctx)
        if decision is not None:
            return decision
    return idle(ctx)


def cache_behind(ctx: Context) -> Decision | None:
    """A Job this controller created is not in the cache yet: deciding now could create it twice."""
    seen = ctx.snap.job_names()
    missing = sorted(ctx.facts.pending_jobs - seen)
    active = ctx.snap.status.get("activeJob")
    if active and active not in seen and active != triggers.interrupted_apply(ctx):
        missing.append(active)
    if not missing:
        return None
    message = f"Job {missing[0]} is not in the cache yet"
    return Requeue(Reason.JOB_CACHE_BEHIND, CACHE_WAIT, message=message)


def running(ctx: Context) -> Decision | None:
    """A running Job is awaited; one that cannot start says why, and once the grace has
    passed the plan ends it (controller/core/plan/planner.py), checked again soon.

    A pause that came while a Job ran names the pause (what the object waits for is
    the resume: the Job only finishes what it began), awaiting the Job as often; a Job
    that cannot start is still ended at its grace, or it would hold clusterctl move's
    block-move for the whole pause."""
    busy = sorted((j for j in ctx.snap.jobs if not is_finished(j)), key=name_of)
    if not busy:
        return None
    name = name_of(busy[0])
    stuck = stuck_job(ctx, busy[0])
    if stuck is None:
        why = pause.pause_of(ctx.snap)
        if why is not None:
            message = f"{why}; no Job starts; Job {name}, started before the pause, runs to its end"
            return Requeue(Reason.PAUSED, RUNNING_WAIT, message=message)
        return Requeue(Reason.JOB_RUNNING, RUNNING_WAIT, message=f"Job {name} is running")
    left = starting.overdue(stuck, ctx.now, ctx.settings.cannot_start_grace)
    if left > 0:
        grace = f"{ctx.settings.cannot_start_grace:g}s"
        message = f"{stuck.message(name)}; ended as a failure {grace} after it began"
        return Requeue(stuck.reason, min(left, RUNNING_WAIT), message=message)
    message = f"{stuck.message(name)}; ended as a failure"
    return Requeue(stuck.reason, starting.ENDING_WAIT, message=message)


def to_end(ctx: Context) -> tuple[dict[str, Any], starting.Stuck] | None:
    """The running Job to end now: it cannot start, its grace has passed, and it has not
    been ended already (its result recorded; the Job controller has yet to fail it)."""
    busy = sorted((j for j in ctx.snap.jobs if not is_finished(j)), key=name_of)
    if not busy or starting.was_ended(busy[0]):
        return None
    stuck = stuck_job(ctx, busy[0])
    if stuck is None or starting.overdue(stuck, ctx.now, ctx.settings.cannot_start_grace) > 0:
        return None
    return busy[0], stuck


def stuck_job(ctx: Context, job: dict[str, Any]) -> starting.Stuck | None:
    """Why the running Job cannot start, its cause redacted; None while it may."""
    stuck = starting.stuck_of(job, ctx.snap.events, ctx.snap.pods)
    if stuck is None:
        return None
    return replace(stuck, cause=ctx.snap.redactor(job).text(stuck.cause))


def destroy(ctx: Context) -> Decision | None:
    """A deletion whose state can be read runs destroy, before any readiness check (a
    missing credentials Secret fails the destroy, which backs off until it returns).
    A failing destroy backs off by the usual rules, forever; the abandon annotation is
    the way out, and the wait says so."""
    if not ctx.snap.deleting:
        return None
    decision = run(ctx, Op.DESTROY, Reason.DELETING, message="the object is being deleted")
    if isinstance(decision, Requeue) and decision.reason == backoff_reason(Reason.DELETING):
        escape = f"; or annotate {ANN_ABANDON}={ctx.snap.uid} to leave the infrastructure untracked"
        return replace(decision, message=decision.message + escape)
    return decision


def restore(ctx: Context) -> Decision | None:
    """A restore runs once per requested serial: a failed one is not retried for that serial.

    status.lastRestoredSerial is the record of the attempt. A restore Job of the wanted
    serial that bookkeeping has not accounted yet also counts as the attempt (the status
    lags it); an accounted one does not, so that removing the annotation, waiting for the
    status to clear and setting the same serial again retries, as documented."""
    wanted = requested_serial(ctx.snap.annotations)
    done = ctx.snap.status.get("lastRestoredSerial")
    if wanted is None or done == wanted:
        return None
    if ctx.snap.deleting and deletion.trouble(ctx) is None:
        return None  # a deletion with a readable state destroys it; nothing to restore
    message = f"{ANN_RESTORE_SERIAL}={wanted} asks for the backup of serial {wanted}"
    if any(_unaccounted_restore(j, wanted) for j in ctx.snap.jobs):
        return None
    return run(
        ctx, Op.RESTORE, Reason.RESTORE_REQUESTED, restore_serial=str(wanted), message=message
    )


def _unaccounted_restore(job: dict[str, object], serial: int) -> bool:
    notes = annotations_of(job)
    return requested_serial(notes) == serial and notes.get(ANN_ACCOUNTED) != "true"


def not_ready(ctx: Context) -> Decision | None:
    snap = ctx.snap
    cred = local_credentials_of(snap.spec)
    if cred and cred not in snap.secrets:
        message = f"credentials Secret {cred} not found"
        return Requeue(Reason.CREDENTIALS_NOT_READY, NOT_READY_WAIT, message=message)
    for dep in dependencies(snap.spec):
        if not _is_ready(snap.related.get(dep)):
            message = f"dependency {dep.kind}/{dep.name} is missing or not Ready"
            return Requeue(Reason.DEPENDENCIES_NOT_READY, NOT_READY_WAIT, message=message)
    if snap.kind != CLUSTER:
        cluster = cluster_of(snap.obj, snap.related)
        if not _is_ready(snap.related.get((CLUSTER, cluster))):
            message = f"cluster {cluster} is missing or not Ready"
            return Requeue(Reason.OWNER_NOT_READY, NOT_READY_WAIT, message=message)
    return None


def state(ctx: Context) -> Decision | None:
    """No Job runs against a state that cannot be read, nor without the state an apply left.

    Whether the object applied is read from what survives `clusterctl move` and a lost
    status (deletion.applied_before: the inputs Secrets' applied mark, the backups, the
    Jobs; status only beside them): with none but status, a moved object whose state is
    gone would apply again and make its infrastructure a second time."""
    problem = deletion.unreadable(ctx)
    if problem:
        return Requeue(Reason.STATE_UNREADABLE, STATE_WAIT, message=problem)
    if ctx.snap.state_secret is not None:
        return None
    shown = deletion.applied_before(ctx)
    if shown is None:
        return None
    message = f"state Secret {ctx.snap.state_name} is gone, and {shown}"
    return Requeue(Reason.STATE_LOST, STATE_WAIT, message=message)


def approval(ctx: Context) -> Decision | None:
    waiting_on = approval_waits.awaiting_approval(ctx)
    if waiting_on is None:
        return None
    message = (
        f"approve TerraformPlan {waiting_on} (spec.approved=true; captf approve "
        f"{ctx.snap.kind}/{ctx.snap.name}) to let the apply proceed"
    )
    return Requeue(Reason.WAITING_FOR_APPROVAL, APPROVAL_WAIT, message=message)


def apply(ctx: Context) -> Decision | None:
    due = triggers.apply_due(ctx)
    if due is None:
        return None
    guarded = approval_waits.guarded(ctx)
    why = due.message
    if not ctx.policy.manual:
        block = approval_waits.approved_block(ctx)
        kept = approval_waits.kept_plan(block) if block is not None else None
        return run(
            ctx,
            Op.APPLY,
            due.trigger,
            guarded=guarded,
            remediation=due.drift_remediation,
            plan_job=kept,
            message=why if kept is None else f"{why}; carrying out approved plan {kept}",
        )
    plan_job = approval_waits.approved_plan(ctx)
    if plan_job is None:
        return run(ctx, Op.PLAN, due.trigger, remediation=due.drift_remediation, message=why)
    return run(
        ctx,
        Op.APPLY,
        due.trigger,
        guarded=guarded,
        remediation=due.drift_remediation,
        plan_job=plan_job,
        message=f"{why}; carrying out approved plan {plan_job}",
    )


def refresh_after_apply(ctx: Context) -> Decision | None:
    applied = triggers.refresh_after_apply(ctx)
    if applied is None:
        return None
    message = f"apply Job {applied.name} left contract outputs that were not definite"
    return run(ctx, Op.REFRESH, Reason.REFRESH_AFTER_APPLY, message=message, due=applied.at)


def health_pending(ctx: Context) -> Decision | None:
    due = triggers.health_pending(ctx)
    return _refresh_when_due(ctx, due, Reason.HEALTH_PENDING, "the health output reads pending")


def health_watch(ctx: Context) -> Decision | None:
    """The health re-read once due; by the drift check when that comes due before the
    next re-read would (`drift_answers_health`)."""
    due = triggers.health_watch(ctx)
    if due is not None and due <= ctx.now and drift_answers_health(ctx):
        message = (
            "the health interval has passed, and the drift check is due before the next:"
            " it reads the machine's health"
        )
        return run(ctx, Op.DRIFT, Reason.HEALTH_CHECK_DUE, message=message, due=due)
    message = "the health interval has passed: the machine's health is read again"
    return _refresh_when_due(ctx, due, Reason.HEALTH_CHECK_DUE, message)


def drift_answers_health(ctx: Context) -> bool:
    """Whether the drift check runs in the health re-read's place: it comes due within
    the next health interval anyway, and a drift check that finds no drift reads the
    health as a refresh does (triggers.health_reads). One Job where there were two: of a
    machine's 7 Jobs every 30 minutes at the default intervals, 6 (issue 39)."""
    drift = triggers.scheduled(ctx, Op.DRIFT)
    interval = ctx.policy.health_interval
    if drift is None or interval is None:
        return False
    last = ctx.history.newest(Op.DRIFT)
    if last is not None and last.outcome != Outcome.SUCCESS:
        return False  # a failing drift check backs off; the health is read on its own
    ahead = timedelta(seconds=triggers.stretched_interval(ctx, interval))
    return drift <= ctx.now + ahead


def membership(ctx: Context) -> Decision | None:
    message = "the membership interval has passed: the pool's members are read again"
    return _refresh_when_due(ctx, triggers.membership(ctx), Reason.MEMBERSHIP_DUE, message)


def _refresh_when_due(
    ctx: Context, due: datetime | None, reason: Reason, message: str
) -> Decision | None:
    """A refresh Job for `reason` once its schedule's time `due` has come."""
    if due is None or due > ctx.now:
        return None
    return run(ctx, Op.REFRESH, reason, message=message, due=due)


def scheduled_checks(ctx: Context) -> Decision | None:
    for op, trigger in ((Op.DRIFT, Reason.DRIFT_CHECK_DUE), (Op.REFRESH, Reason.REFRESH_DUE)):
        due = triggers.scheduled(ctx, op)
        if due is not None and due <= ctx.now:
            return run(ctx, op, trigger, message=f"the {op} interval has passed", due=due)
    return None


def idle(ctx: Context) -> Idle:
    checks = [triggers.scheduled(ctx, op) for op in (Op.DRIFT, Op.REFRESH)]
    watches = [triggers.health_pending(ctx), triggers.health_watch(ctx), triggers.membership(ctx)]
    times = [t for t in [*checks, *watches] if t]
    if not times:
        return Idle(None, message="nothing scheduled")
    soonest = min(times)
    return Idle(max((soonest - ctx.now).total_seconds(), 0.0), message="next scheduled check")


# The order, as docs/decisions.md's table "The order" lists it (a test holds the two
# together): a Job of this controller's is never created twice, a running Job is
# awaited; then what Cluster API forbids (pause.py: a move is never a destroy, a paused
# object starts nothing, pause before deletion); then the deletion (deletion.py: never a
# blind destroy; a cluster's machines and pools go first); then, for anything but a
# destroy, whom the object acts for (owners.py); then the ops.
STEPS: tuple[Step, ...] = (
    cache_behind,
    running,
    pause.moved,
    pause.paused,
    pause.externally_managed,
    deletion.deleted,
    deletion.not_its_state,
    pause.deletion_blocked,
    deletion.retain,
    deletion.abandon,
    restore,
    deletion.held,
    deletion.without_state,
    destroy,
    deletion.retained_state,
    owners.owner_waits,
    owners.member_cluster,
    owners.cluster_infrastructure,
    owners.bootstrap_data,
    not_ready,
    state,
    denials.policy_denied,
    approval,
    apply,
    refresh_after_apply,
    health_pending,
    health_watch,
    membership,
    scheduled_checks,
)

__all__ = ["MUTABLE_KINDS", "context_of", "decide"]
