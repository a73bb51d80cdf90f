"""The runner's judgement of a plan: the policy set its Job was given, judged after the
plan and before anything applies (controller/policy/judge.py), as the report its result
carries (controller/core/jobs/policy_report.py).

A set that does not read (the controller sent one too large, or the variable was
edited) is denied: the runner cannot know which rules to apply, and a plan is let
through only by rules that ran. A RequireApproval rule is satisfied by an apply that
carries an approved plan (the approval was given on that plan's TerraformPlan)."""

from __future__ import annotations

from controller.core.jobs.policy_report import Report, Verdict, Violation, bounded
from controller.core.spec.plan_policies import Action, PolicySetError, decode
from controller.policy.judge import judge
from controller.policy.verdict import report_from
from runtime.jsonobj import Json

# The violation of a set that does not read: no policy or rule to name.
UNREADABLE = Violation(
    policy="(policy set)",
    rule="(unreadable)",
    action=Action.DENY.value,
    why="invalid",
    message="the policies given to this Job could not be read; nothing is applied",
)


def report_of(policies: str | None, plan: Json, *, approved: bool) -> Report | None:
    """The judgement of `plan` by the set `policies` (RunnerVar.POLICIES); None when the
    Job was given none (no policy selects its object)."""
    if policies is None:
        return None
    try:
        chosen = decode(policies)
    except PolicySetError:
        return bounded(Verdict.DENIED, [UNREADABLE])
    found = judge(chosen.rules, plan, chosen.subject)
    print(
        f"captf-runner: policies: {len(chosen.rules)} rule(s), cost {found.cost} units, "
        f"{'judged' if found.judged else 'not judged (over a bound)'}",
        flush=True,
    )
    return report_from(found, approved=approved)
