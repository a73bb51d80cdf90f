"""A judgement as the runner reports it: the verdict and the bounded violations
(controller/core/jobs/policy_report.py), strongest action first. The runner and `captf
policy test` both report through it, so a test in CI says what the Job would."""

from __future__ import annotations

from controller.core.jobs.policy_report import Report, Verdict, Violation, bounded
from controller.core.spec.plan_policies import ACTIONS, Action
from controller.policy.judge import Judgement


def report_from(found: Judgement, *, approved: bool) -> Report:
    """`approved`: the apply carries a plan a person approved, which satisfies the
    RequireApproval rules (never a Deny)."""
    violations = [
        Violation(
            policy=v.rule.policy,
            rule=v.rule.name,
            action=v.rule.action.value,
            why=v.why.value,
            message=v.rule.message,
            addresses=v.addresses,
            count=len(v.addresses),
        )
        for action in ACTIONS
        for v in found.of(action)
    ]
    return bounded(verdict_of(found.action, approved=approved), violations)


def verdict_of(action: Action | None, *, approved: bool) -> Verdict:
    match action:
        case Action.DENY:
            return Verdict.DENIED
        case Action.REQUIRE_APPROVAL:
            return Verdict.APPROVED if approved else Verdict.APPROVAL_REQUIRED
        case Action.WARN:
            return Verdict.WARNED
    return Verdict.COMPLIANT
