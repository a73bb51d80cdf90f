"""The HealthWatched condition of a TerraformMachine: whether the health watch
(controller/core/decide/triggers.py, `health_watch`) is reading the instance, what the
last reading said, how many unhealthy readings run in a row toward the remediation mark
(controller/core/decide/remediation.py), and when the next reading is due. Pure.

- True, HealthWatched: the newest apply or refresh told the health.
- False, HealthWatchOff: spec.health.interval is 0.
- False, HealthWatchHeld: paused, suspended or being deleted; no reading starts.
- Unknown, HealthReadingFailed: the newest apply or refresh failed, was cut off, or told
  nothing (a null or `unknown` health, no reading in its result).
- Unknown, HealthNotRead: no apply has finished yet.

Only a machine whose module speaks the contract has it (only it has a health to read).
The message names times the history fixes (a Job's end, a schedule), never "now": the
text changes with a reading, not with every pass, so it does not rewrite the status."""

from __future__ import annotations

from typing import Final

from controller.core.basics.names import MACHINE, Op, Reason
from controller.core.basics.timefmt import format_time
from controller.core.decide import background, pause, remediation, triggers
from controller.core.decide.context import Context, speaks_contract
from controller.core.decide.decision import Decision, Requeue, Run
from controller.core.jobs import backoff
from controller.core.jobs.history import Finished
from controller.core.jobs.job import Outcome, is_finished, op_of
from controller.core.jobs.readings import reading_of
from runtime.jsonobj import Json

HEALTH_WATCHED: Final = "HealthWatched"
WATCHED: Final = "HealthWatched"
OFF: Final = "HealthWatchOff"
HELD: Final = "HealthWatchHeld"
FAILED: Final = "HealthReadingFailed"
NOT_READ: Final = "HealthNotRead"
_READS = (Op.APPLY, Op.REFRESH)


def _cond(status: str, reason: str, message: str) -> Json:
    return {"type": HEALTH_WATCHED, "status": status, "reason": reason, "message": message}


def health_watched(ctx: Context, decision: Decision) -> Json | None:
    """The condition, or None for anything but a machine of the contract."""
    if ctx.snap.kind != MACHINE or not speaks_contract(ctx.inputs):
        return None
    if ctx.policy.health_interval is None:
        return _cond("False", OFF, "spec.health.interval is 0: the health is not read again")
    held = _held(ctx, decision)
    if held is not None:
        return _cond("False", HELD, f"{held}: no reading starts")
    told = next(triggers.health_told(ctx), None)
    newest = next((r for r in ctx.history if _read(r)), None)
    coming = _next(ctx, decision)
    note = background.stretched_note(ctx, ctx.policy.health_interval)
    coming += f"; {note}" if note else ""
    if newest is None:
        return _cond("Unknown", NOT_READ, "no apply has finished yet: the first reads the health")
    last = _last(ctx, told)
    if told is None or told[0].name != newest.name:
        what = _untold(newest)
        return _cond("Unknown", FAILED, f"{what}; {last}; {coming}")
    return _cond("True", WATCHED, f"{last}; {coming}")


def _read(record: Finished) -> bool:
    """An apply or refresh of any outcome, or a drift check that read the health (a
    successful one that found no drift: triggers.health_reads)."""
    return record.op in _READS or (
        record.op == Op.DRIFT and record.outcome == Outcome.SUCCESS and bool(reading_of(record.job))
    )


def _held(ctx: Context, decision: Decision) -> str | None:
    if ctx.snap.deleting:
        return "the object is being deleted"
    why = pause.pause_of(ctx.snap)
    if why is not None:
        return why
    if isinstance(decision, Requeue) and decision.reason == Reason.SUSPENDED:
        return "spec.suspend is true"
    return None


def _last(ctx: Context, told: tuple[Finished, str] | None) -> str:
    """The newest reading that told the health, and the unhealthy row it is part of."""
    if told is None:
        return "no reading has told the health yet"
    record, health = told
    text = f"{record.op} Job {record.name} read {remediation.describe(health)}"
    text += f" at {format_time(record.at)}"
    row = remediation.unhealthy_row(ctx)
    if row.due is not None:
        text += f" ({row.due}: the Machine is marked for remediation)"
    elif row.count:
        text += f" ({row.count} of {row.threshold} unhealthy readings in a row before the"
        text += " Machine is marked for remediation)"
    return text


def _untold(record: Finished) -> str:
    """What the newest apply or refresh that told nothing did instead."""
    when = format_time(record.at)
    if record.outcome == Outcome.SUCCESS:
        return f"{record.op} Job {record.name} at {when} could not tell the health"
    return f"{record.op} Job {record.name} {record.outcome.value} at {when}"


def _next(ctx: Context, decision: Decision) -> str:
    """When the next reading is due: the health watch's time (or HealthPending's), no
    sooner than the refresh's backoff allows; now while a refresh starts or runs."""
    if (isinstance(decision, Run) and decision.op == Op.REFRESH) or _refreshing(ctx):
        return "a reading runs now"
    due = [t for t in (triggers.health_pending(ctx), triggers.health_watch(ctx)) if t]
    if not due:
        return "no reading scheduled"
    soonest = min(due)
    retry = backoff.retry_at(ctx.history, Op.REFRESH, ctx.policy.failed_limit)
    if retry is not None and retry > soonest:
        soonest = retry
    return f"next reading due at {format_time(soonest)}"


def _refreshing(ctx: Context) -> bool:
    return any(not is_finished(job) and op_of(job) == Op.REFRESH for job in ctx.snap.jobs)
