"""A `captf.io/approve` that approves nothing: the controller says so instead of ignoring it.

An approval names a Job. It does something only while that Job is the one DecideOp
waits on (see `awaiting_approval`); naming any other Job leaves the object as it
was. Two cases deserve a Warning: another Job waits (a typo, or an older plan was
approved), or the named Job is not of a kind that ever waits for approval. An
approval of a Job that waited and has since been carried out is history, not a
mistake; so is one naming a Job that is gone when nothing waits."""

from __future__ import annotations

import hashlib

from controller.core.basics.names import ANN_APPROVE, Op
from controller.core.decide.context import Context
from controller.core.decide.steps import awaiting_approval
from controller.core.jobs.job import Outcome

REASON = "ApprovalIgnored"


def _approvable(op: str, outcome: Outcome) -> bool:
    if op == Op.PLAN:
        return outcome == Outcome.SUCCESS
    return op == Op.APPLY and outcome in (Outcome.BLOCKED, Outcome.PLAN_CHANGED)


def ignored_approval(ctx: Context) -> str | None:
    """Why the approval annotation approves nothing, or None when it is fine (or absent)."""
    named = ctx.approved
    if not named:
        return None
    waiting = awaiting_approval(ctx)
    if waiting is not None:
        return f"{ANN_APPROVE}={named} approves nothing: Job {waiting} is the one waiting"
    record = next((r for r in ctx.history if r.name == named), None)
    if record is None:
        if named in ctx.snap.job_names():
            return f"{ANN_APPROVE}={named} approves nothing: that Job is still running"
        return None
    if _approvable(record.op, record.outcome):
        return None
    return (
        f"{ANN_APPROVE}={named} approves nothing: it is a {record.op} Job that "
        f"{record.outcome.value}; only a plan or a blocked apply waits for approval"
    )


def event_suffix(message: str) -> str:
    """A stable suffix for the Warning's Event name: one Event per distinct mistake."""
    return hashlib.sha256(message.encode()).hexdigest()[:10]
