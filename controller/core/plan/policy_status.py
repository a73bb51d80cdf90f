"""The PolicyCompliant condition: what the policies found of the object's newest judged
plan (its newest apply, or Manual plan, whose Job reported a judgement).

  True   Compliant        no rule matched
  True   PolicyApproved   a RequireApproval rule matched, and the plan applied was approved
  False  PolicyWarned     only Warn rules matched; it applied (a Warning Event says so)
  False  ApprovalRequired a RequireApproval rule matched: it waits for its TerraformPlan
  False  PolicyDenied     a Deny rule matched: nothing applied (decide/denials.py)

The message names the policy, the rule and the first resource addresses matched, redacted
with the values the Job carried. An object no policy has judged shows no condition; once
shown, it keeps saying what the newest judgement found. Pure."""

from __future__ import annotations

from typing import Final

from controller.core.basics.names import COND_POLICY_COMPLIANT, Op
from controller.core.decide.context import Context
from controller.core.jobs.job import result
from controller.core.jobs.policy_report import Report, Verdict, from_json
from runtime.jsonobj import Json

_SAID: Final = {
    Verdict.COMPLIANT: (True, "Compliant"),
    Verdict.APPROVED: (True, "PolicyApproved"),
    Verdict.WARNED: (False, "PolicyWarned"),
    Verdict.APPROVAL_REQUIRED: (False, "ApprovalRequired"),
    Verdict.DENIED: (False, "PolicyDenied"),
}


def policy_condition(ctx: Context) -> Json | None:
    for record in sorted(
        (*ctx.history.of(Op.APPLY), *ctx.history.of(Op.PLAN)), key=lambda r: r.at, reverse=True
    ):
        report = from_json((result(record.job) or {}).get("policy"))
        if report is None:
            continue
        ok, reason = _SAID[report.verdict]
        text = ctx.snap.redactor(record.job).text(message_of(report, record.name))
        return {
            "type": COND_POLICY_COMPLIANT,
            "status": "True" if ok else "False",
            "reason": reason,
            "message": text,
        }
    return None


def message_of(report: Report, job: str) -> str:
    if not report.violations:
        return f"Job {job}: no policy rule matched its plan"
    shown = "; ".join(v.line() for v in report.violations)
    more = report.total - len(report.violations)
    return f"Job {job}: {shown}" + (f"; and {more} more rule(s)" if more > 0 else "")
