"""The guards of an op's schedule and credentials: the identity it runs with, its
backoff, a change window. Each returns a Requeue when it holds the op back; guards.py
lists them, with every other wait between a due op and its Job, in their order."""

from __future__ import annotations

from datetime import datetime

from controller.core.basics.names import (
    IDENTITY,
    Reason,
    backoff_reason,
)
from controller.core.basics.ops import traits
from controller.core.basics.timefmt import format_time
from controller.core.decide.context import Context
from controller.core.decide.decision import Requeue
from controller.core.jobs import backoff
from controller.core.spec.identity import credentials_secret, verdict_of
from controller.core.spec.windows import next_opening, open_window

# A wait on what is not ready yet (credentials, dependencies, the owner); a watch of it
# wakes the object sooner.
NOT_READY_WAIT = 30.0
# An identity that does not let the object run: the watches of identities, Namespaces
# and Secrets wake the object when that changes; the requeue is only the fallback.
IDENTITY_WAIT = 300.0


def _seconds(until: datetime, now: datetime) -> float:
    return max((until - now).total_seconds(), 0.0)


def check_backoff(ctx: Context, op: str, trigger: str) -> Requeue | None:
    """Requeue `<Trigger>Backoff` until the op's delay after its failures has passed (an op
    that backs off: a restore is tried once per serial instead)."""
    if not traits(op).backs_off:
        return None
    until = backoff.retry_at(ctx.history, op, ctx.policy.failed_limit)
    if until is None or until <= ctx.now:
        return None
    failures = len(ctx.history.failures(op))
    # No "in N seconds" here: the message goes into status conditions, and a text that
    # changed with every pass would rewrite the status, and wake the watch, every pass.
    message = f"{op} failed {failures} time(s) in a row; next attempt at {format_time(until)}"
    return Requeue(
        reason=backoff_reason(trigger),
        after=_seconds(until, ctx.now),
        op=op,
        message=message,
        missed_window=_missed_window(ctx, op, until),
    )


def _missed_window(ctx: Context, op: str, retry_at: datetime) -> tuple[datetime, datetime] | None:
    """The window open now that closes before the retry may start: that window is missed."""
    if not traits(op).windowed or not ctx.policy.windows:
        return None
    window = open_window(ctx.policy.windows, ctx.now)
    return window if window is not None and window[1] <= retry_at else None


def check_window(ctx: Context, op: str) -> Requeue | None:
    """Ops that change infrastructure start only inside a change window."""
    if not traits(op).windowed or not ctx.policy.windows:
        return None
    opens = next_opening(ctx.policy.windows, ctx.now)
    if opens == ctx.now:
        return None
    if opens is None:  # unreachable with valid windows; wait a day and look again
        return Requeue(Reason.OUTSIDE_CHANGE_WINDOW, 86400.0, op, "no change window opens soon")
    message = f"{op} waits for the change window opening at {format_time(opens)}"
    return Requeue(Reason.OUTSIDE_CHANGE_WINDOW, _seconds(opens, ctx.now), op, message)


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
