"""What the runner reports of a plan's judgement (the `policy` key of its result), and
what the controller shows of it: the verdict and the violations, bounded.

The verdict decides nothing here: the outcome does (`policy-denied`, or `blocked` for an
apply held for approval), and the policy version is the hash the controller stamped on
the Job when it created it. The report says which policy and rule, and which resource
addresses, for the PolicyCompliant condition, the Events and `captf policy test`'s
peers. It holds policy text and addresses, never a value of the plan: a rule's message
is the policy's own, and an address names a resource."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import orjson

from runtime.jsonobj import Json

# What a report may hold: it must leave most of the runner's 4 KiB to the rest.
REPORT_LIMIT: Final = 1024
ADDRESSES_SHOWN: Final = 3
TEXT_LIMIT: Final = 120
ACTIONS: Final = frozenset({"Deny", "RequireApproval", "Warn"})
WHYS: Final = frozenset({"matched", "error", "invalid", "limit"})


class Verdict(StrEnum):
    COMPLIANT = "compliant"  # no rule matched
    WARNED = "warned"  # only Warn rules matched: applied
    APPROVAL_REQUIRED = "approval-required"  # held for a TerraformPlan approval
    APPROVED = "approved"  # a RequireApproval rule matched; the plan carried was approved
    DENIED = "denied"  # a Deny rule matched: nothing applied


# What a violation that is not a plain match adds to its line.
_WHY_SAID: Final = {
    "error": "; its evaluation failed (fail closed)",
    "invalid": "; it does not compile (fail closed)",
    "limit": "; the plan was not judged: over the policy cost limit (fail closed)",
}


@dataclass(frozen=True)
class Violation:
    policy: str
    rule: str
    action: str  # Deny, RequireApproval or Warn
    why: str  # matched, error (fail closed), invalid (did not compile), limit (not judged)
    message: str
    addresses: tuple[str, ...] = ()  # the first few matched
    count: int = 0  # how many changes matched (a Plan rule: 0)

    def to_json(self) -> Json:
        out: Json = {
            "policy": self.policy,
            "rule": self.rule,
            "action": self.action,
            "why": self.why,
            "message": self.message,
        }
        if self.addresses:
            out["addresses"] = list(self.addresses)
        if self.count:
            out["count"] = self.count
        return out

    def line(self) -> str:
        """`policy P rule R (Deny): message [a, b and 3 more]`."""
        shown = ", ".join(self.addresses)
        more = self.count - len(self.addresses)
        if more > 0:
            shown += f" and {more} more"
        why = _WHY_SAID.get(self.why, "")
        where = f" [{shown}]" if shown else ""
        return f"policy {self.policy} rule {self.rule} ({self.action}): {self.message}{where}{why}"


@dataclass(frozen=True)
class Report:
    verdict: Verdict
    violations: tuple[Violation, ...] = ()  # strongest first, as many as fit
    total: int = 0  # how many rules matched in all

    def to_json(self) -> Json:
        out: Json = {"verdict": self.verdict.value}
        if self.violations:
            out["violations"] = [v.to_json() for v in self.violations]
        if self.total:
            out["total"] = self.total
        return out


def bounded(verdict: Verdict, violations: list[Violation]) -> Report:
    """The report with texts cut to TEXT_LIMIT, addresses to ADDRESSES_SHOWN, and as many
    violations (in the order given) as keep its JSON within REPORT_LIMIT bytes."""
    cut = [
        Violation(
            v.policy[:TEXT_LIMIT],
            v.rule[:TEXT_LIMIT],
            v.action,
            v.why,
            v.message[:TEXT_LIMIT],
            tuple(a[:TEXT_LIMIT] for a in v.addresses[:ADDRESSES_SHOWN]),
            max(v.count, len(v.addresses)),
        )
        for v in violations
    ]
    kept: list[Violation] = []
    for violation in cut:
        report = Report(verdict, (*kept, violation), len(cut))
        if len(orjson.dumps(report.to_json())) > REPORT_LIMIT:
            break
        kept.append(violation)
    return Report(verdict, tuple(kept), len(cut))


def from_json(body: object) -> Report | None:
    """The report a result holds; None when it is not shaped so."""
    if not isinstance(body, dict) or set(body) - {"verdict", "violations", "total"}:
        return None
    try:
        verdict = Verdict(str(body.get("verdict")))
    except ValueError:
        return None
    listed = body.get("violations", [])
    total = body.get("total", 0)
    if not isinstance(listed, list) or not isinstance(total, int) or isinstance(total, bool):
        return None
    found = [_violation(v) for v in listed]
    if any(v is None for v in found):
        return None
    return Report(verdict, tuple(v for v in found if v is not None), total)


def _violation(body: object) -> Violation | None:
    keys = {"policy", "rule", "action", "why", "message", "addresses", "count"}
    if not isinstance(body, dict) or set(body) - keys:
        return None
    texts = [body.get(k) for k in ("policy", "rule", "message")]
    addresses = body.get("addresses", [])
    count = body.get("count", 0)
    if not all(isinstance(t, str) for t in texts) or body.get("action") not in ACTIONS:
        return None
    if body.get("why") not in WHYS or not isinstance(addresses, list):
        return None
    if not all(isinstance(a, str) for a in addresses) or not isinstance(count, int):
        return None
    return Violation(
        str(body["policy"]),
        str(body["rule"]),
        str(body["action"]),
        str(body["why"]),
        str(body["message"]),
        tuple(addresses),
        count,
    )
