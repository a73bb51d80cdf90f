"""Why an op is due: the apply triggers, and the drift and refresh schedules."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from controller.core.basics.names import (
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
    MUTABLE_KINDS,
    Op,
    Reason,
)
from controller.core.basics.serials import serial_of
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.core.decide.context import Context
from controller.core.jobs import backoff
from controller.core.jobs.job import Outcome, annotations_of, created_at, seq_of

Json = dict[str, Any]


@dataclass(frozen=True)
class ApplyDue:
    trigger: str
    drift_remediation: bool = False


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
