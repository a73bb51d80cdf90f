"""What an apply or a plan does with the policies' judgement of its plan (ops.py asks):
stop as denied, wait for a person, or go on. The judge itself, and the CEL library under
it, are loaded only for a Job given policies (judging.py): most Jobs judge nothing."""

from __future__ import annotations

from controller.core.jobs.policy_report import Report, Verdict
from controller.runner import plans
from controller.runner.env import RunnerEnv
from runtime.jsonobj import Json


def judged(env: RunnerEnv, plan: Json) -> Report | None:
    """The policies' report on the plan; None when the Job was given none. A Job carrying
    an approved plan has its RequireApproval rules satisfied by that approval."""
    if env.policies is None:
        return None
    from controller.runner import judging

    approved = bool(env.approved_plan_secret or env.approved_fingerprint)
    return judging.report_of(env.policies, plan, approved=approved)


def denied(report: Report | None) -> str | None:
    """Why the policies deny the plan, or None."""
    if report is None or report.verdict is not Verdict.DENIED:
        return None
    found = next((v for v in report.violations if v.action == "Deny"), None)
    return found.line() if found is not None else "a policy denies the plan"


def held(env: RunnerEnv, plan: Json, report: Report | None) -> list[str]:
    """Why the apply waits for a person: the guard's deletions, a RequireApproval rule."""
    reasons = []
    destroyed = plans.destroyed(plan)
    if env.guarded and destroyed:
        reasons.append("the plan deletes or replaces " + ", ".join(destroyed))
    if report is not None and report.verdict is Verdict.APPROVAL_REQUIRED:
        asked = next((v for v in report.violations if v.action == "RequireApproval"), None)
        reasons.append(asked.line() if asked is not None else "a policy requires an approval")
    return reasons
