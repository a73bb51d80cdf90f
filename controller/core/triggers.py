"""Why an op is due: the apply triggers, and the drift and refresh schedules."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.core import backoff
from controller.core.context import Context
from controller.core.jobs import Outcome, annotations_of, created_at
from controller.core.names import (
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    MUTABLE_KINDS,
    Op,
    Reason,
)
from controller.core.timefmt import TimeFormatError, parse_time


@dataclass(frozen=True)
class ApplyDue:
    trigger: str
    drift_remediation: bool = False


def interrupted_apply(ctx: Context) -> str | None:
    """The recorded apply Job that disappeared while it ran, unless a later apply succeeded."""
    for secret in ctx.snap.inputs_secrets():
        notes = annotations_of(secret)
        job: str | None = notes.get(ANN_INTERRUPTED_APPLY)
        if job and not _cleared_since(ctx, notes.get(ANN_INTERRUPTED_APPLY_AT)):
            return job
    return None


def _cleared_since(ctx: Context, recorded: str | None) -> bool:
    """An apply created after the record succeeded. Without a record time, nothing clears it
    here: bookkeeping removes the annotation when that apply succeeds."""
    if not recorded:
        return False
    try:
        since = parse_time(recorded)
    except TimeFormatError:
        return False
    for record in ctx.history.of(Op.APPLY):
        started = created_at(record.job)
        if record.outcome == Outcome.SUCCESS and started is not None and started >= since:
            return True
    return False


def apply_due(ctx: Context) -> ApplyDue | None:
    """The first apply trigger that holds, in the order of DecideOp's step 9."""
    if ctx.snap.kind in MUTABLE_KINDS:
        if interrupted_apply(ctx):
            return ApplyDue(Reason.INTERRUPTED_APPLY)
        if ctx.snap.state_secret is None or ctx.state_inputs_hash != ctx.inputs.hash:
            return ApplyDue(Reason.INPUTS_CHANGED)
        if _last_apply_failed(ctx):
            return ApplyDue(Reason.LAST_APPLY_FAILED)
    else:
        if ctx.snap.state_secret is None:
            return ApplyDue(Reason.NO_STATE)
        if not ctx.state_inputs_hash:
            return ApplyDue(Reason.STATE_WITHOUT_INPUTS_HASH)
    if remediation_due(ctx):
        return ApplyDue(Reason.DRIFT_REMEDIATION, drift_remediation=True)
    return None


def _last_apply_failed(ctx: Context) -> bool:
    """The newest apply that is not a drift remediation failed, or was cut off mid-run
    (it may have applied part of its change). Blocked and plan-changed changed nothing."""
    for record in ctx.history.of(Op.APPLY):
        if record.remediation or record.outcome in (Outcome.BLOCKED, Outcome.PLAN_CHANGED):
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


def scheduled(ctx: Context, op: str) -> datetime | None:
    """When a drift check or refresh is next due; None when it has no interval or no apply
    has succeeded yet. Measured from the op's newest finished Job, else the newest
    successful apply. With neither Job left (the state shows an apply whose Job is gone)
    it is due now: the interval cannot be shown not to have elapsed, and the Job it runs
    anchors the schedule from then on (pruning keeps each op's newest success)."""
    interval = ctx.policy.drift_interval if op == Op.DRIFT else ctx.policy.refresh_interval
    if interval is None or not ctx.has_applied():
        return None
    last = ctx.history.newest(op)
    applied = ctx.history.newest(Op.APPLY, outcome=Outcome.SUCCESS)
    base = last.at if last else applied.at if applied else None
    return ctx.now if base is None else base + timedelta(seconds=interval)
