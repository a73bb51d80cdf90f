"""Approvals as DecideOp reads them: which Job waits for a person, and which plan an
apply carries out once a person approved it (docs/decisions.md, the approval rows).

Split from the steps (steps.py's `approval` and `apply` call these) so each reads on its
own: the steps say when, this module says which plan. `captf approve` and the
TerraformPlans' lifecycle (controller/core/plan/plan_objects.py) read
`awaiting_approval` too. Pure."""

from __future__ import annotations

from controller.core.basics.names import ANN_PLAN_JOB, Op
from controller.core.decide.context import Context
from controller.core.jobs.history import Finished
from controller.core.jobs.job import Outcome, annotations_of, created_at, inputs_hash_of, result


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


def guarded(ctx: Context) -> bool:
    """The guard applies unless destruction is allowed or the blocked apply was approved."""
    return not ctx.policy.allow_destructive and approved_block(ctx) is None


def approved_block(ctx: Context) -> Finished | None:
    """The newest apply, when it stopped for a person (blocked by the guard, or its plan
    changed since approval and it kept the new plan), its TerraformPlan is approved, and
    it ran with the current inputs: approving it approves the changes its plan showed for
    those inputs, not for inputs changed since."""
    last = ctx.history.newest(Op.APPLY)
    if last is None or last.name not in ctx.approved:
        return None
    changed = last.outcome == Outcome.PLAN_CHANGED and kept_plan(last) is not None
    if last.outcome != Outcome.BLOCKED and not changed:
        return None
    made_for = inputs_hash_of(last.job)
    return last if made_for is None or made_for == ctx.inputs.hash else None


def approved_plan(ctx: Context) -> str | None:
    """The plan an apply carries out in Manual mode: the plan an approved blocked apply
    stopped on (approving it approves those changes), or for a blocked apply that kept
    none the plan it carried out, or an approved open plan."""
    block = approved_block(ctx)
    if block is not None:
        carried_out = (
            kept_plan(block)
            or annotations_of(block.job).get(ANN_PLAN_JOB)
            or _plan_before(ctx, block)
        )
        if carried_out:
            return carried_out
    plan = ctx.open_plan()
    return plan.name if plan is not None and plan.name in ctx.approved else None


def kept_plan(apply_job: Finished) -> str | None:
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
