"""What DecideOp returns: run an op, requeue after a while with a reason, or idle.

Outcomes are data. The controller maps each to actions in one place; the CLI
prints `to_json` of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller.core.basics.timefmt import format_time
from controller.core.leases.writes import LeaseWrite


@dataclass(frozen=True)
class Run:
    op: str
    reason: str  # the trigger
    retry: int  # 1 + counted failures of the op since its last success
    guarded: bool = False
    drift_remediation: bool = False
    plan_job: str | None = None  # the approved plan an apply carries out
    plan_fingerprint: str | None = None  # what its TerraformPlan showed the approver
    restore_serial: str | None = None
    # Why the trigger holds, for `captf decide -v`; not part of the decision's identity.
    message: str = field(default="", compare=False)
    # What the guards computed on the way (decide/guards.py), for the launch, which never
    # computes it again: the Leases it takes, in order, and the run slots to try next
    # should another Job take the first claim's meanwhile. Not part of the identity.
    claims: tuple[LeaseWrite, ...] = field(default=(), compare=False, repr=False)
    other_slots: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Requeue:
    reason: str
    after: float  # seconds
    op: str | None = None  # set where the wait belongs to one op (backoff, change window)
    message: str = ""
    # (opens, closes) of a change window this op's retry cannot start inside.
    missed_window: tuple[datetime, datetime] | None = None


@dataclass(frozen=True)
class Idle:
    after: float | None  # seconds until the earliest scheduled check; None: nothing scheduled
    reason: str | None = None
    message: str = ""


Decision = Run | Requeue | Idle


def to_json(decision: Decision, *, verbose: bool = False) -> dict[str, Any]:
    """The `captf decide` output: exactly the spec's keys unless verbose."""
    out: dict[str, Any]
    match decision:
        case Run(op=op, reason=reason, retry=retry):
            out = {"action": "run", "op": op, "reason": reason, "retry": retry}
            if verbose:
                out |= {"guarded": decision.guarded, "driftRemediation": decision.drift_remediation}
                out |= {"planJob": decision.plan_job} if decision.plan_job else {}
                restore = decision.restore_serial
                out |= {"restoreSerial": restore} if restore else {}
                out |= {"message": decision.message} if decision.message else {}
        case Requeue(reason=reason, after=after, op=op):
            out = {"action": "requeue"}
            if op:
                out["op"] = op
            out |= {"reason": reason, "after": round(float(after), 3)}
            if verbose and decision.missed_window is not None:
                opens, closes = decision.missed_window
                out["missedWindow"] = {"opens": format_time(opens), "closes": format_time(closes)}
            if verbose and decision.message:
                out["message"] = decision.message
        case Idle(after=after):
            out = {"action": "idle"}
            if decision.reason:
                out["reason"] = decision.reason
            if after is not None:
                out["after"] = round(float(after), 3)
            if verbose and decision.message:
                out["message"] = decision.message
    return out
