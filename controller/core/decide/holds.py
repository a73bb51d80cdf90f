"""The guards that read the Facts: what only a live pass knows stops a Run (guards.py
lists them, in their order, with the others).

- `refused`: the API server refused this very Job lately (`Facts.refusal`); its
  backoff has not passed;
- `runner_rbac_not_ready`: the account its pod would run as has not opted in
  (`Facts.runner`, the namespace's runner RBAC as the caches show it; the verdict is
  the context's, computed once per pass: the plan's condition and creates read it too);
- `image_resolving`: its module image must be looked up first (`Facts.image` does
  not hold the answer the pass asked for, controller/core/decide/pinning.py).

Without Facts (`captf decide -f`) the first two never hold, since nothing was refused
and no RBAC was read. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta

from controller.core.basics.names import MUTABLE_KINDS, Op, Reason
from controller.core.basics.ops import traits
from controller.core.decide import pinning
from controller.core.decide.context import Context
from controller.core.decide.decision import Requeue
from controller.core.decide.facts import Refusal
from controller.core.jobs import backoff
from controller.core.spec.image import reference_digest
from controller.core.spec.policy import Policy

# The runner's account is not ready: a label change on the account wakes the object sooner.
RUNNER_RBAC_WAIT = 30.0


def refusal_wait(refusal: Refusal, policy: Policy, now: datetime) -> float:
    """Seconds left of the refusal's backoff: like a failed Job's, under the object's
    failure limit, from the last refusal."""
    until = refusal.at + timedelta(seconds=backoff.delay(refusal.count, policy.failed_limit))
    return (until - now).total_seconds()


def refused(ctx: Context, op: str, job: str) -> Requeue | None:
    """The refusal wait of `op`, whose launch would create `job`, while it lasts and that
    same Job would be tried again: a pass woken by anything else (its own status write)
    must not ask again before then."""
    refusal = ctx.facts.refusal
    if refusal is None or refusal.job != job:
        return None
    wait = refusal_wait(refusal, ctx.policy, ctx.now)
    if wait <= 0:
        return None
    return Requeue(Reason.JOB_REFUSED, wait, op=op, message=refusal.message)


def runner_rbac_not_ready(ctx: Context) -> Requeue | None:
    """No Job: its pod could not be created, or would run as an account whose owner did
    not consent."""
    verdict = ctx.runner_verdict
    if verdict is None or verdict.ready:
        return None
    return Requeue(Reason.RUNNER_RBAC_NOT_READY, RUNNER_RBAC_WAIT, message=verdict.message)


def image_resolving(ctx: Context, op: str, trigger: str) -> Requeue | None:
    """The wait while the pass's registry lookup is outstanding: io makes it as a step of
    this pass's plan (Plan.image_lookup) and requeues at once."""
    reference = lookup_needed(ctx, op)
    return None if reference is None else pinning.resolving(op, trigger, reference)


def lookup_needed(ctx: Context, op: str) -> str | None:
    """The reference io must look up before a Run of `op` may start (pinning.py says when);
    None when it needs no lookup, or the lookup was made."""
    image = ctx.inputs.image
    if image is None:
        return None
    fact = ctx.facts.image
    if fact is not None and fact.asked and fact.reference == image.reference:
        return None
    if not image.digest:
        return image.reference
    if ctx.snap.kind not in MUTABLE_KINDS and ctx.has_applied():
        return None  # pinned: an immutable machine never resolves its tag again
    if op == Op.DRIFT and reference_digest(image.reference):
        return None
    return image.reference if traits(op).looks_up_image else None
