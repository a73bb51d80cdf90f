"""DecideOp: the one decision for an object, from a snapshot and the time.

Steps are checked in order and the first that applies wins; the order and the
reason names are part of the API. Pure: no I/O, no clock, no randomness."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from controller.core.basics.names import (
    ANN_ABANDON,
    ANN_ACCOUNTED,
    ANN_PLAN_JOB,
    ANN_RESTORE_SERIAL,
    CLUSTER,
    IDENTITY,
    MUTABLE_KINDS,
    Op,
    Reason,
    backoff_reason,
)
from controller.core.basics.serials import requested_serial
from controller.core.decide import approvals, deletion, gates, holds, owners, pause, triggers
from controller.core.decide.context import Context, context_of
from controller.core.decide.decision import Decision, Idle, Requeue, Run
from controller.core.decide.facts import NO_FACTS, Facts
from controller.core.decide.settings import Settings
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs import backoff, starting
from controller.core.jobs.history import Finished
from controller.core.jobs.job import (
    Outcome,
    annotations_of,
    created_at,
    inputs_hash_of,
    is_finished,
    name_of,
    result,
)
from controller.core.spec.identity import credentials_secret, verdict_of
from controller.core.spec.ready import is_ready as _is_ready
from controller.core.spec.refs import cluster_of, dependencies, local_credentials_of

# Requeue intervals of the waits, in seconds (the table "What does not back off").
CACHE_WAIT = 5.0
RUNNING_WAIT = 60.0  # the Job watch wakes the reconcile sooner
NOT_READY_WAIT = 30.0
STATE_WAIT = 60.0
APPROVAL_WAIT = 600.0  # an approval (a TerraformPlan's change) wakes the reconcile sooner
SUSPEND_WAIT = 600.0  # the spec change that resumes wakes the reconcile sooner
# An identity that does not let the object run: the watches of identities, Namespaces
# and Secrets wake the object when that changes; the requeue is only the fallback.
IDENTITY_WAIT = 300.0

Step = Callable[[Context], Decision | None]


def decide(
    snap: Snapshot, now: datetime, settings: Settings | None = None, facts: Facts = NO_FACTS
) -> Decision:
    """The decision of `captf decide` and of every test of DecideOp: nothing remembered,
    nothing read live, unless `facts` says otherwise."""
    return decide_in(context_of(snap, now, settings, facts))


def decide_in(ctx: Context | Requeue) -> Decision:
    """The decision in a context read once for the pass (the planner's), or its wait: the
    first step that applies, once spec.suspend and the holds (holds.py: a refused Job,
    the runner's RBAC, the cached Leases, the image lookup) have had their say on a Run."""
    if isinstance(ctx, Requeue):
        return ctx
    for step in STEPS:
        decision = step(ctx)
        if decision is not None:
            return holds.held(ctx, suspended(ctx, decision))
    return idle(ctx)


def suspended(ctx: Context, decision: Decision) -> Decision:
    """spec.suspend holds every new Job; what it holds stays visible as the op and its
    trigger. Waits and idles pass: they start nothing."""
    if not (ctx.policy.suspend and isinstance(decision, Run)):
        return decision
    message = f"spec.suspend is true; {decision.op} ({decision.reason}) would run next"
    return Requeue(Reason.SUSPENDED, SUSPEND_WAIT, op=decision.op, message=message)


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
    problem = deletion.unreadable(ctx)
    if problem:
        return Requeue(Reason.STATE_UNREADABLE, STATE_WAIT, message=problem)
    serial = ctx.snap.status.get("stateSerial") or 0
    if ctx.snap.state_secret is None and isinstance(serial, int) and serial > 0:
        message = f"state Secret {ctx.snap.state_name} is gone but serial {serial} was applied"
        return Requeue(Reason.STATE_LOST, STATE_WAIT, message=message)
    return None


def approval(ctx: Context) -> Decision | None:
    waiting_on = awaiting_approval(ctx)
    if waiting_on is None:
        return None
    message = (
        f"approve TerraformPlan {waiting_on} (spec.approved=true; captf approve "
        f"{ctx.snap.kind}/{ctx.snap.name}) to let the apply proceed"
    )
    return Requeue(Reason.WAITING_FOR_APPROVAL, APPROVAL_WAIT, message=message)


def awaiting_approval(ctx: Context) -> str | None:
    """The Job whose TerraformPlan (of the same name) waits for a person: a blocked or
    plan-changed apply, or (Manual) an unused plan; None when nothing waits. `captf
    approve` and the TerraformPlans' lifecycle read the same function.

    Each wait holds on its own until its own plan is approved: approving an apply does
    not approve a plan made after it."""
    waits: list[str] = []
    last = ctx.history.newest(Op.APPLY)
    stopped = last is not None and last.outcome in (Outcome.BLOCKED, Outcome.PLAN_CHANGED)
    if last is not None and stopped and not _wait_moved_on(ctx, last):
        # New inputs end the wait: its plan, and so its approval, was for the old ones.
        made_for = inputs_hash_of(last.job)
        if made_for is None or made_for == ctx.inputs.hash:
            waits.append(last.name)
    if ctx.policy.manual and (plan := ctx.open_plan()) is not None:
        waits.append(plan.name)
    return next((name for name in waits if name not in ctx.approved), None)


def _wait_moved_on(ctx: Context, apply_job: Finished) -> bool:
    """In Manual mode, a plan created after the apply finished: that happens only once the
    apply's wait has ended (approved, or new inputs), so the wait has moved on to that
    plan. Not in Auto mode, where an apply is not preceded by a plan: a plan there was
    made before a switch from Manual, and says nothing about this apply's approval."""
    return ctx.policy.manual and any(
        (created := created_at(plan.job)) is not None and created >= apply_job.at
        for plan in ctx.history.of(Op.PLAN)
    )


def apply(ctx: Context) -> Decision | None:
    due = triggers.apply_due(ctx)
    if due is None:
        return None
    guarded = _guarded(ctx)
    why = due.message
    if not ctx.policy.manual:
        block = _approved_block(ctx)
        kept = _kept_plan(block) if block is not None else None
        return run(
            ctx,
            Op.APPLY,
            due.trigger,
            guarded=guarded,
            remediation=due.drift_remediation,
            plan_job=kept,
            message=why if kept is None else f"{why}; carrying out approved plan {kept}",
        )
    plan_job = _approved_plan(ctx)
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


def _guarded(ctx: Context) -> bool:
    """The guard applies unless destruction is allowed or the blocked apply was approved."""
    return not ctx.policy.allow_destructive and _approved_block(ctx) is None


def _approved_block(ctx: Context) -> Finished | None:
    """The newest apply, when it stopped for a person (blocked by the guard, or its plan
    changed since approval and it kept the new plan), its TerraformPlan is approved, and
    it ran with the current inputs: approving it approves the changes its plan showed for
    those inputs, not for inputs changed since."""
    last = ctx.history.newest(Op.APPLY)
    if last is None or last.name not in ctx.approved:
        return None
    changed = last.outcome == Outcome.PLAN_CHANGED and _kept_plan(last) is not None
    if last.outcome != Outcome.BLOCKED and not changed:
        return None
    made_for = inputs_hash_of(last.job)
    return last if made_for is None or made_for == ctx.inputs.hash else None


def _approved_plan(ctx: Context) -> str | None:
    """The plan an apply carries out in Manual mode: the plan an approved blocked apply
    stopped on (approving it approves those changes), or for a blocked apply that kept
    none the plan it carried out, or an approved open plan."""
    block = _approved_block(ctx)
    if block is not None:
        carried_out = (
            _kept_plan(block)
            or annotations_of(block.job).get(ANN_PLAN_JOB)
            or _plan_before(ctx, block)
        )
        if carried_out:
            return carried_out
    plan = ctx.open_plan()
    return plan.name if plan is not None and plan.name in ctx.approved else None


def _kept_plan(apply_job: Finished) -> str | None:
    """The apply Job itself, when it kept the plan it stopped on (its result names the
    plan Secret, named after the Job): its approved apply compares with that plan."""
    return apply_job.name if (result(apply_job.job) or {}).get("planSecret") else None


def _plan_before(ctx: Context, apply_job: Finished) -> str | None:
    """The plan an apply that does not name one carried out: the newest successful plan
    that had finished when the apply was created (in Manual mode every apply follows
    its plan, one Job at a time)."""
    started = created_at(apply_job.job) or apply_job.at
    for plan in ctx.history.of(Op.PLAN):
        if plan.outcome == Outcome.SUCCESS and plan.at <= started:
            return plan.name
    return None


def refresh_after_apply(ctx: Context) -> Decision | None:
    applied = triggers.refresh_after_apply(ctx)
    if applied is None:
        return None
    message = f"apply Job {applied.name} left contract outputs that were not definite"
    return run(ctx, Op.REFRESH, Reason.REFRESH_AFTER_APPLY, message=message)


def health_pending(ctx: Context) -> Decision | None:
    due = triggers.health_pending(ctx)
    if due is None or due > ctx.now:
        return None
    return run(ctx, Op.REFRESH, Reason.HEALTH_PENDING, message="the health output reads pending")


def health_watch(ctx: Context) -> Decision | None:
    due = triggers.health_watch(ctx)
    if due is None or due > ctx.now:
        return None
    message = "the health interval has passed: the machine's health is read again"
    return run(ctx, Op.REFRESH, Reason.HEALTH_CHECK_DUE, message=message)


def membership(ctx: Context) -> Decision | None:
    due = triggers.membership(ctx)
    if due is None or due > ctx.now:
        return None
    message = "the membership interval has passed: the pool's members are read again"
    return run(ctx, Op.REFRESH, Reason.MEMBERSHIP_DUE, message=message)


def scheduled_checks(ctx: Context) -> Decision | None:
    for op, trigger in ((Op.DRIFT, Reason.DRIFT_CHECK_DUE), (Op.REFRESH, Reason.REFRESH_DUE)):
        due = triggers.scheduled(ctx, op)
        if due is not None and due <= ctx.now:
            return run(ctx, op, trigger, message=f"the {op} interval has passed")
    return None


def idle(ctx: Context) -> Idle:
    checks = [triggers.scheduled(ctx, op) for op in (Op.DRIFT, Op.REFRESH)]
    watches = [triggers.health_pending(ctx), triggers.health_watch(ctx), triggers.membership(ctx)]
    times = [t for t in [*checks, *watches] if t]
    if not times:
        return Idle(None, message="nothing scheduled")
    soonest = min(times)
    return Idle(max((soonest - ctx.now).total_seconds(), 0.0), message="next scheduled check")


def run(
    ctx: Context,
    op: str,
    trigger: str,
    *,
    guarded: bool = False,
    remediation: bool = False,
    plan_job: str | None = None,
    restore_serial: str | None = None,
    message: str = "",
) -> Decision:
    """Run the op unless its identity, its backoff, a change window or a lease holds it back."""
    held = identity_held(ctx, op)
    if held is not None:
        return held
    if op != Op.RESTORE:
        held = gates.check_backoff(ctx, op, trigger) or gates.check_window(ctx, op)
        if held is not None:
            return held
    held = gates.check_leases(ctx)
    if held is not None:
        return held
    return Run(
        op=op,
        reason=trigger,
        retry=backoff.retry_number(ctx.history, op),
        guarded=guarded and op == Op.APPLY,
        drift_remediation=remediation and op == Op.APPLY,
        plan_job=plan_job,
        plan_fingerprint=approvals.approved_fingerprint(ctx.snap, plan_job) if plan_job else None,
        restore_serial=restore_serial,
        message=message,
    )


def identity_held(ctx: Context, op: str) -> Requeue | None:
    """No Job of any op, a destroy included, runs with a TerraformClusterIdentity that
    does not allow the object's namespace, lacks its Secret or its required keys, or
    whose mirror Secret is not in the namespace yet: its credentials would not be there
    (or should not be). A Job already running is not stopped. A kind Secret reference
    keeps the older rule (`not_ready`: a destroy runs, and fails without it)."""
    ref = ctx.snap.identity_ref
    if ref is None or ref.kind != IDENTITY:
        return None
    verdict = verdict_of(ref, ctx.snap.identity, ctx.snap.namespace, ctx.snap.secrets)
    if not verdict.allowed:
        message = f"{op} waits: {verdict.message} ({verdict.reason})"
        return Requeue(Reason.CREDENTIALS_NOT_READY, IDENTITY_WAIT, op=op, message=message)
    mirror = credentials_secret(ref)
    if mirror not in ctx.snap.secrets:
        message = f"{op} waits for Secret {mirror}, the copy of {IDENTITY} {ref.name}'s Secret"
        return Requeue(Reason.CREDENTIALS_NOT_READY, NOT_READY_WAIT, op=op, message=message)
    return None


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
    approval,
    apply,
    refresh_after_apply,
    health_pending,
    health_watch,
    membership,
    scheduled_checks,
)

__all__ = ["MUTABLE_KINDS", "context_of", "decide"]
