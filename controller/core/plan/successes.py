"""The Event a successful Job is accounted with: what it achieved, once per Job.

Failures carry their Event in their classification (controller/core/jobs/job.py);
successes are named here by op. A refresh, and a drift check that found no drift,
change nothing a person waits for and get none."""

from __future__ import annotations

from controller.core.basics.names import ANN_APPROVE, Op
from controller.core.jobs.history import Finished
from controller.core.jobs.job import Outcome, result

APPLIED = "Applied"
DRIFT_DETECTED = "DriftDetected"
DRIFT_REMEDIATED = "DriftRemediated"
DESTROYED = "Destroyed"
RESTORED = "Restored"
PLAN_READY = "PlanReady"


def success_event(record: Finished) -> tuple[str, str] | None:
    """(reason, message) of a successful Job's Event, or None for no Event."""
    if record.outcome != Outcome.SUCCESS:
        return None
    said = record.verdict.message
    match record.op:
        case Op.APPLY:
            return (DRIFT_REMEDIATED if record.remediation else APPLIED), said
        case Op.DRIFT if (result(record.job) or {}).get("drift"):
            return DRIFT_DETECTED, said
        case Op.DESTROY:
            return DESTROYED, said
        case Op.RESTORE:
            return RESTORED, said
        case Op.PLAN:
            return PLAN_READY, f"{said}; annotate {ANN_APPROVE}={record.name} to apply it"
    return None
