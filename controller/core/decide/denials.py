"""PolicyDenied: a TerraformPolicy denied the plan of the object's newest apply (or, in
Manual mode, its newest plan), and nothing runs until that would change.

Like a blocked apply (DestructivePlanBlocked), a denied one changed nothing and counts
toward no backoff; unlike it, no approval lets it through. The wait lasts while the
denied Job was made for the current inputs and was given the current policy set (its
`captf.io/policy-hash`, stamped by the controller when it created the Job, against the
hash of the set the object's policies make now: controller/core/spec/plan_policies.py).
New inputs, or an edit of a policy, a policy added or deleted, or a label that selects
otherwise, end it, and the next apply is judged again. The same wait holds an apply
while the selected policies are too large for a Job to carry.

One step of DecideOp, beside the approval wait (steps.py's STEPS). Pure."""

from __future__ import annotations

from controller.core.basics.names import ANN_POLICY_HASH, Op, Reason
from controller.core.decide import triggers
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Requeue
from controller.core.jobs import policy_report
from controller.core.jobs.history import Finished
from controller.core.jobs.job import Outcome, annotations_of, inputs_hash_of, result
from controller.core.spec.plan_policies import ENCODED_LIMIT

# A policy's change, or the object's, wakes the reconcile sooner (io/handlers.py).
POLICY_WAIT = 600.0
_ENDS = "an edit of the policies or new inputs lets the apply run again"


def newest_judged(ctx: Context) -> Finished | None:
    """The newest finished apply or plan: the Jobs whose plans are judged."""
    found = [r for r in (ctx.history.newest(Op.APPLY), ctx.history.newest(Op.PLAN)) if r]
    return max(found, key=lambda r: r.at, default=None)


def current_denial(ctx: Context) -> Finished | None:
    """The newest judged Job, when a policy denied it for the current inputs and set."""
    record = newest_judged(ctx)
    if record is None or record.outcome != Outcome.POLICY_DENIED:
        return None
    made_for = inputs_hash_of(record.job)
    if made_for is not None and made_for != ctx.inputs.hash:
        return None
    given = annotations_of(record.job).get(ANN_POLICY_HASH)
    now = ctx.policies.hash if ctx.policies is not None else None
    return record if given == now else None


def policy_denied(ctx: Context) -> Decision | None:
    record = current_denial(ctx)
    if record is not None:
        message = f"{record.op} Job {record.name}: {denial_line(ctx, record)}; {_ENDS}"
        return Requeue(Reason.POLICY_DENIED, POLICY_WAIT, op=record.op, message=message)
    policies = ctx.policies
    if policies is not None and policies.too_large() and triggers.apply_due(ctx) is not None:
        size = len(policies.encode().encode())
        message = (
            f"the policies that select this object make {size} bytes of rules, more than a "
            f"Job carries ({ENCODED_LIMIT}); nothing is applied until they are fewer"
        )
        return Requeue(Reason.POLICY_DENIED, POLICY_WAIT, op=Op.APPLY, message=message)
    return None


def denial_line(ctx: Context, record: Finished) -> str:
    """The first Deny the Job's report names (policy, rule, message, addresses), redacted
    with the values the Job carried; the Job's message when its report names none."""
    report = policy_report.from_json((result(record.job) or {}).get("policy"))
    denies = [v for v in (report.violations if report else ()) if v.action == "Deny"]
    said = denies[0].line() if denies else record.verdict.message
    return ctx.snap.redactor(record.job).text(said)
