"""Why an op is due: the apply triggers, and the schedule (drift and refresh intervals
with their jitter, the refresh after an apply whose outputs were not definite, and the
refreshes while health is pending)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.core.basics.names import (
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
    CLUSTER,
    MACHINE,
    MUTABLE_KINDS,
    POOL,
    Op,
    Reason,
)
from controller.core.basics.serials import serial_of
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.core.decide import background, pinning
from controller.core.decide.context import Context, speaks_contract
from controller.core.jobs import backoff
from controller.core.jobs.history import Finished, finished_after
from controller.core.jobs.job import Outcome, annotations_of, created_at, seq_of
from controller.core.jobs.readings import Reading, reading_of
from controller.core.leases.budget import stretched
from runtime.jsonobj import Json

# The share of an interval a check may start late by: spread over it by uid, so that
# objects created, moved or restarted together do not check in lockstep.
JITTER_SHARE = 0.1
# Refreshes while the health reads pending: 30 s after the first pending reading,
# doubling with each further one, at most 5 min. The streak starts again at each
# successful apply: what it made or changed is read soon (docs/decisions.md).
HEALTH_PENDING_FIRST = 30.0
HEALTH_PENDING_CAP = 300.0
# The schedule name a health re-read's jitter is drawn under (not an op's: the refresh
# interval's jitter differs, so the two schedules do not coincide).
HEALTH = "health"
MEMBERSHIP = "membership"
# What a reading may say of a machine's instance beside the module's health states: running
# with `healthy = false`, and no provider ID any more where one was written (the module no
# longer finds the instance it made). Neither is a state a module reports.
RUNNING_UNHEALTHY = "running-unhealthy"
GONE = "gone"
# The readings of an instance that is there but not serving, or gone.
UNHEALTHY = frozenset({"degraded", "stopped", "terminated", RUNNING_UNHEALTHY})


@dataclass(frozen=True)
class ApplyDue:
    trigger: str
    drift_remediation: bool = False
    message: str = ""


def interrupted_apply(ctx: Context) -> str | None:
    """The recorded apply Job that disappeared while it ran, unless a later apply succeeded."""
    for secret in ctx.snap.inputs_secrets():
        notes = annotations_of(secret)
        job: str | None = notes.get(ANN_INTERRUPTED_APPLY)
        if job and not _cleared(ctx, notes):
            return job
    return None


def _cleared(ctx: Context, notes: dict[str, str]) -> bool:
    """An apply created after the record succeeded. A record that says neither its sequence
    nor its time is not cleared here: bookkeeping removes it when an apply succeeds."""
    return any(
        record.outcome == Outcome.SUCCESS and started_after_record(record.job, notes)
        for record in ctx.history.of(Op.APPLY)
    )


def started_after_record(job: Json, notes: dict[str, str]) -> bool | None:
    """Whether an apply Job was created after the interrupted-apply record `notes`; None
    when the record says neither its sequence nor its time.

    The recorded sequence was the op's next one when the record was made, so every apply
    there was then has a lower one: no clocks are compared. The recorded time (older
    records) is the controller's clock, compared with the API server's creationTimestamp,
    which a controller clock running ahead (--time-scale, skew) would never reach."""
    seq = serial_of(notes.get(ANN_INTERRUPTED_APPLY_SEQ))
    if seq is not None:
        return seq_of(job) >= seq
    try:
        since = parse_time(notes.get(ANN_INTERRUPTED_APPLY_AT) or "")
    except TimeFormatError:
        return None
    started = created_at(job)
    return started is not None and started >= since


def apply_due(ctx: Context) -> ApplyDue | None:
    """The first apply trigger that holds, in the order of DecideOp's step 9."""
    if ctx.snap.kind in MUTABLE_KINDS:
        if job := interrupted_apply(ctx):
            return ApplyDue(Reason.INTERRUPTED_APPLY, message=f"apply Job {job} vanished as it ran")
        if ctx.snap.state_secret is None or ctx.state_inputs_hash != ctx.inputs.hash:
            moved = pinning.tag_moved(ctx.snap, ctx.inputs, ctx.state_inputs_hash)
            if moved is not None:
                return ApplyDue(Reason.IMAGE_TAG_MOVED, message=moved)
            message = f"inputs {ctx.inputs.hash8} are not the ones the state was applied with"
            return ApplyDue(Reason.INPUTS_CHANGED, message=message)
        if _last_apply_failed(ctx):
            return ApplyDue(Reason.LAST_APPLY_FAILED, message="the newest apply did not succeed")
    else:
        if ctx.snap.state_secret is None:
            return ApplyDue(Reason.NO_STATE, message="no state Secret: never applied")
        if not ctx.state_inputs_hash:
            message = "the state records no successful apply's inputs"
            return ApplyDue(Reason.STATE_WITHOUT_INPUTS_HASH, message=message)
    if remediation_due(ctx):
        message = "a drift check found drift and spec.drift.remediate is true"
        return ApplyDue(Reason.DRIFT_REMEDIATION, drift_remediation=True, message=message)
    return None


_CHANGED_NOTHING = frozenset({Outcome.BLOCKED, Outcome.PLAN_CHANGED, Outcome.POLICY_DENIED})


def _last_apply_failed(ctx: Context) -> bool:
    """The newest apply that is not a drift remediation failed, or was cut off mid-run
    (it may have applied part of its change). Blocked, plan-changed and policy-denied
    changed nothing."""
    for record in ctx.history.of(Op.APPLY):
        if record.remediation or record.outcome in _CHANGED_NOTHING:
            continue
        return record.outcome in (Outcome.FAILURE, Outcome.INTERRUPTED)
    return False


def remediation_due(ctx: Context) -> bool:
    limit = backoff.effective_limit(ctx.policy.failed_limit)
    return (
        ctx.policy.drift_remediate
        and ctx.history.drift_pending()
        and ctx.history.remediation_failures() < limit
    )


def stretched_interval(ctx: Context, interval: float) -> float:
    """A background schedule's interval under its credentials' budget: stretched by the
    factor their budget Lease records (issue 39), so the fleet's schedules fit the budget
    a minute; the jitter is drawn over the stretched interval, so they stay spread."""
    return stretched(interval, background.stretch(ctx))


def jitter(uid: str, op: str, interval: float) -> float:
    """Seconds in [0, interval/10) by which the object's checks of `op` start late: the
    same for the same uid, spread evenly over uids. No uid (a hand-made snapshot), none."""
    if not uid:
        return 0.0
    digest = hashlib.sha256(f"{uid}/{op}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return round(interval * JITTER_SHARE * fraction, 3)


def scheduled(ctx: Context, op: str) -> datetime | None:
    """When a drift check or refresh is next due; None when it has no interval or no apply
    has succeeded yet. Measured from the op's newest finished Job, else the newest
    successful apply, then the interval and the object's jitter (`anchored`)."""
    interval = ctx.policy.drift_interval if op == Op.DRIFT else ctx.policy.refresh_interval
    if interval is None or not ctx.has_applied():
        return None
    interval = stretched_interval(ctx, interval)
    last = ctx.history.newest(op)
    applied = ctx.history.newest(Op.APPLY, outcome=Outcome.SUCCESS)
    base = last.at if last else applied.at if applied else None
    return anchored(ctx, base, interval, jitter(ctx.snap.uid, op, interval))


def anchored(ctx: Context, base: datetime | None, interval: float, late: float) -> datetime:
    """When a schedule measured from the Job that finished at `base` is due: `interval`
    and the object's jitter `late` after it. With no Job to measure from (the state
    shows an apply whose Jobs are gone: a move carries none, pruning may take them), at
    the object's creation plus its jitter, at once for an object older than that: the
    interval cannot be shown not to have elapsed, objects moved together do not come due
    together, and the Job it runs anchors the schedule from then on (pruning keeps each
    op's newest success). Every schedule is anchored so (docs/decisions.md, "The order")."""
    if base is not None:
        return base + timedelta(seconds=interval + late)
    created = created_at(ctx.snap.obj)
    return max(ctx.now, created + timedelta(seconds=late)) if created else ctx.now


def health_watch(ctx: Context) -> datetime | None:
    """When a Ready machine's health is next re-read: spec.health.interval (5 min by
    default; 0 turns it off) after its newest successful apply or refresh, late by its
    jitter (`jitter(uid, "health")`, under a tenth of the interval); with neither Job
    (moved, pruned) as `anchored` says, so a moved machine is still watched and can
    still be remediated. None for a cluster or pool, a module outside the contract, an
    object never applied, and while the newest reading's health is pending or null:
    HealthPending has its own schedule then (and the refresh after an apply, a step
    before, reads an apply's pending outputs first).
    A reading that tells nothing (`unknown`, no reading in the result) or leaves outputs
    pending is read again on this schedule: nothing else would. A failed refresh backs
    off by the seed's rules (`run`)."""
    interval = ctx.policy.health_interval
    if ctx.snap.kind != MACHINE or interval is None or not speaks_contract(ctx.inputs):
        return None
    interval = stretched_interval(ctx, interval)
    records = health_reads(ctx)
    if not records and not ctx.has_applied():
        return None
    reading = contract_reading(ctx, records[0]) if records else None
    if reading is not None and reading.health_pending:
        return None
    base = records[0].at if records else None
    return anchored(ctx, base, interval, jitter(ctx.snap.uid, HEALTH, interval))


def health_reads(ctx: Context) -> list[Finished]:
    """The successful Jobs that read a machine's instance, newest first: applies and
    refreshes, and drift checks that found no drift, whose plan read every resource as a
    refresh does and carries the contract reading of what it read (issue 39: a drift
    check answers the health re-read, one Job fewer). A drift check that found drift, or
    whose runner reported no reading, read nothing the schedule counts."""
    return [
        r
        for r in ctx.history
        if r.outcome == Outcome.SUCCESS
        and (r.op in (Op.APPLY, Op.REFRESH) or (r.op == Op.DRIFT and reading_of(r.job)))
    ]


def membership(ctx: Context) -> datetime | None:
    """When a pool's members are next re-read (a refresh Job: the module's
    provider_id_list, replicas and instances, which the write-back copies): every
    spec.membership.interval (60 s by default; 0 turns it off) after its newest refresh
    of any outcome, else its newest successful apply, late by its jitter
    (`jitter(uid, "membership")`); with neither Job (moved, pruned) as `anchored` says.
    None for a cluster or machine, a module outside the contract, and a pool never
    applied. A failed re-read backs off as any refresh does (`run`); it is never an
    apply's failure, and an apply due comes first (its step precedes this one)."""
    interval = ctx.policy.membership_interval
    if ctx.snap.kind != POOL or interval is None or not speaks_contract(ctx.inputs):
        return None
    interval = stretched_interval(ctx, interval)
    if not ctx.has_applied():
        return None
    applied = ctx.history.newest(Op.APPLY, outcome=Outcome.SUCCESS)
    refreshed = ctx.history.newest(Op.REFRESH)
    times = [record.at for record in (applied, refreshed) if record is not None]
    base = max(times) if times else None
    return anchored(ctx, base, interval, jitter(ctx.snap.uid, MEMBERSHIP, interval))


def health_told(ctx: Context) -> Iterator[tuple[Finished, str]]:
    """What the readings say of the instance, newest first, with the Job that read each
    (`health_reads`: a successful apply, refresh, or drift check that found no drift):
    the health's state, RUNNING_UNHEALTHY or GONE (`told_of`). A reading that tells
    nothing is passed over: a result without a contract reading (its outputs could not
    be read), a null or `unknown` health. Nobody could tell then, so it neither counts
    as unhealthy nor shows the instance well."""
    for record in health_reads(ctx):
        reading = contract_reading(ctx, record)
        told = told_of(ctx, reading) if reading is not None else None
        if told is not None:
            yield record, told


def told_of(ctx: Context, reading: Reading) -> str | None:
    """What one reading says of a machine's instance. `terminated` is what it says
    whatever else is missing; a machine whose spec.providerID was written and whose
    reading has no provider_id is GONE (the module no longer finds its instance), whatever
    its health says; `running` with `healthy = false` is RUNNING_UNHEALTHY."""
    told = reading.told
    if told == "terminated":
        return told
    written = ctx.snap.kind == MACHINE and ctx.snap.spec.get("providerID")
    if written and reading.waits_for("provider_id"):
        return GONE
    if reading.running_unhealthy:
        return RUNNING_UNHEALTHY
    return told


def refresh_after_apply(ctx: Context) -> Finished | None:
    """A machine's or pool's newest successful apply whose contract reading was not
    definite and that no successful refresh has followed: the refresh reads what the
    apply could not. A failed refresh leaves it due (its backoff spaces the retries, as
    for any op); an interrupted one too. An apply without a reading, or whose module
    does not speak the contract, asks for none."""
    if ctx.snap.kind == CLUSTER:
        return None
    applied = ctx.history.newest(Op.APPLY, outcome=Outcome.SUCCESS)
    if applied is None:
        return None
    reading = contract_reading(ctx, applied)
    if reading is None or reading.definite:
        return None
    refreshed = ctx.history.newest(Op.REFRESH, outcome=Outcome.SUCCESS)
    return applied if refreshed is None or not finished_after(refreshed, applied) else None


def contract_reading(ctx: Context, record: Finished) -> Reading | None:
    """The Job's contract reading, when the object's module speaks the contract. The
    runner reads the role's outputs of any state; a module that is its own root declares
    none of them, so its reading is all pending and never changes: waiting on it would
    refresh the object forever (docs/decisions.md, "A module outside the contract")."""
    return reading_of(record.job) if speaks_contract(ctx.inputs) else None


def health_pending(ctx: Context) -> datetime | None:
    """When the next refresh is due while the newest contract reading (of a successful
    apply or refresh) says health is pending or null: 30 s after the first pending reading of
    the streak, doubling with each further one, at most 5 min; None otherwise."""
    streak = _pending_streak(ctx)
    if not streak:
        return None
    delay = min(HEALTH_PENDING_FIRST * 2 ** min(len(streak) - 1, 16), HEALTH_PENDING_CAP)
    return streak[0].at + timedelta(seconds=delay)


def _pending_streak(ctx: Context) -> list[Finished]:
    """The Jobs that read the health (`health_reads`) with a pending health reading,
    newest first, back to the first reading that was not pending (or the newest apply,
    which starts a streak of its own)."""
    streak: list[Finished] = []
    for record in health_reads(ctx):
        reading = contract_reading(ctx, record)
        if reading is None or not reading.health_pending:
            break
        streak.append(record)
        if record.op == Op.APPLY:
            break
    return streak
