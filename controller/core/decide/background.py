"""Background Jobs in their budget (issue 39), as DecideOp reads it: which ops are
background, the stretch of an object's schedules, and the wait of a background Job for
its share of the run slots or its identity's budget a minute.

A background Job only reads: a drift check, or a refresh (the health re-read, the
membership re-read, the refresh after an apply, a scheduled refresh). Everything else
carries out a change (an apply, a destroy, a plan, a restore) and never waits here.
The arithmetic is controller/core/leases/budget.py's; the record of the starts and the
stretch is the credentials' budget Lease (controller/core/leases/budget_lease.py),
which the snapshot holds beside the run slots. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Final

from controller.core.basics.names import ANN_HOLDER_CLASS, Reason
from controller.core.basics.ops import traits
from controller.core.basics.timefmt import format_duration
from controller.core.decide.context import Context
from controller.core.decide.decision import Requeue
from controller.core.jobs.job import annotations_of
from controller.core.leases import budget_lease
from controller.core.leases.budget import priority_delay, slot_wait
from controller.core.leases.budget_demand import PER_MINUTE_FIELD, per_minute_of
from controller.core.leases.family import holder_of
from controller.core.leases.slots import is_run_slot
from controller.core.leases.writes import LeaseWrite, Role
from runtime.jsonobj import Json

# The wait for a slot of the share: a run slot coming free wakes the background waiters
# when no change waits (controller/io/handlers.py), so this is only the fallback. Longer
# than a Lease wait: waiting objects are many and the wait's `at` is written each time it
# passes (the bench's "before": a status write a second per waiting machine at 30x).
SHARE_WAIT: Final = 300.0
# On a run slot: the class of its holder (names.ANN_HOLDER_CLASS).
BACKGROUND: Final = "background"
CHANGE: Final = "change"


def is_background(op: str) -> bool:
    """The table of operations says (controller/core/basics/ops.py): drift, refresh."""
    return traits(op).background


def class_of(op: str) -> str:
    return BACKGROUND if is_background(op) else CHANGE


def key(ctx: Context) -> str:
    """The object's budget key: the credentials it reads the cloud through."""
    return budget_lease.budget_key(ctx.snap.identity_ref, ctx.snap.namespace)


def lease(ctx: Context) -> Json | None:
    return budget_lease.find(ctx.snap.leases, ctx.settings.slot_namespace, key(ctx))


def per_minute(ctx: Context) -> int:
    """The budget of the object's credentials: its identity's, else the controller's."""
    identity = ctx.snap.identity.identity
    found = {}
    if identity is not None:
        found[str(identity["metadata"]["name"])] = identity
    return per_minute_of(key(ctx), found, ctx.settings.background_jobs_per_minute)


def stretch(ctx: Context) -> float:
    """The factor the object's schedules are stretched by (1: not stretched)."""
    return budget_lease.stretch_in(lease(ctx))


def stretched_note(ctx: Context, interval: float) -> str:
    """`every 12m (budget of identity aws-prod: 40/min)` while stretched, else ""."""
    factor = stretch(ctx)
    if factor <= 1.0:
        return ""
    every = format_duration(interval * factor)
    return f"every {every} (budget of {key(ctx)}: {per_minute(ctx)}/min)"


def held(ctx: Context, op: str, job: str, due: datetime | None = None) -> Requeue | None:
    """The wait of a background Job: its share of the run slots taken (or the last free
    slot kept for a change), else its credentials' budget spent for this minute. `due`:
    when its schedule came due, which orders the waiters (budget.priority_delay)."""
    if not is_background(op):
        return None
    slots = ctx.settings.max_concurrent_runs
    held_by, background = _slots_held(ctx, job)
    why = slot_wait(
        background=True,
        held=held_by,
        held_background=background,
        slots=slots,
        share=ctx.settings.background_run_share,
    )
    if why is not None:
        # No time in the message: a status that changed with every pass would be
        # rewritten, and wake every watcher, on each one (status.next.at has the time).
        message = f"{op} waits: {why}; changes come first"
        return Requeue(Reason.WAITING_FOR_BACKGROUND_BUDGET, SHARE_WAIT, op=op, message=message)
    budget = per_minute(ctx)
    free = budget_lease.free_at(lease(ctx), job, ctx.now, budget)
    if free is None:
        return None
    late = (free - due).total_seconds() if due is not None else 0.0
    after = (free - ctx.now).total_seconds() + priority_delay(late)
    message = (
        f"{op} waits: {key(ctx)} started {budget} background Jobs in the last minute, its"
        f" budget ({_budget_source(ctx)})"
    )
    return Requeue(Reason.WAITING_FOR_BACKGROUND_BUDGET, max(after, 0.0), op=op, message=message)


def share_of(ctx: Context, op: str) -> float | None:
    """The share of the run slots a Job of `op` is held to; None for a change."""
    return ctx.settings.background_run_share if is_background(op) else None


def share_full(op: str) -> str:
    """Why a background Job waits when the cache shows none of its share's slots free
    (claims.LeaseReading.claims)."""
    return f"{op} waits: background Jobs hold every run slot of their share; changes come first"


def with_claims(
    ctx: Context, op: str, job: str, claims: tuple[LeaseWrite, ...]
) -> tuple[LeaseWrite, ...]:
    """The launch's claims with its class on the run slot and, for a background Job, its
    start on its credentials' budget Lease right after the slot: taken by
    compare-and-swap, so the budget holds whatever the caches show."""
    if not claims or claims[0].role != Role.RUN_SLOT:
        return claims
    slot = replace(claims[0], holder_class=class_of(op))
    if not is_background(op):
        return (slot, *claims[1:])
    key_ = key(ctx)
    start = LeaseWrite(
        ctx.settings.slot_namespace,
        budget_lease.budget_lease_name(key_),
        job,
        Role.BACKGROUND_BUDGET,
        budget_key=key_,
        per_minute=per_minute(ctx),
    )
    return (slot, start, *claims[1:])


def _budget_source(ctx: Context) -> str:
    identity = ctx.snap.identity.identity
    if identity is not None and (identity.get("spec") or {}).get(PER_MINUTE_FIELD) is not None:
        return f"spec.{PER_MINUTE_FIELD}"
    return "--background-jobs-per-minute"


def _slots_held(ctx: Context, job: str) -> tuple[int, int]:
    """Run slots held by other Jobs than the object's own, and how many of them by
    background Jobs (a slot that does not say its class counts as a change's)."""
    own = ctx.snap.job_names() | {job}
    held = background = 0
    for slot in ctx.snap.leases:
        if (
            not is_run_slot(slot)
            or slot["metadata"].get("namespace") != ctx.settings.slot_namespace
        ):
            continue
        holder = holder_of(slot)
        if not holder or holder in own:
            continue
        held += 1
        if annotations_of(slot).get(ANN_HOLDER_CLASS) == BACKGROUND:
            background += 1
    return held, background
