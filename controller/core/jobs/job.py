"""Reading one Job: its op, whether and when it finished, and what its outcome counts as.

The classification is the table of "Counting failures": a Job is a success, a
counted failure, or one of the outcomes that count nowhere (interrupted from
outside, blocked by the guard, plan changed since approval)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

import orjson

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_DRIFT_REMEDIATION,
    ANN_INPUTS_HASH,
    ANN_RESULT,
    ANN_SEQ,
    CANNOT_START,
    LABEL_OP,
    Op,
)
from controller.core.basics.ops import traits
from controller.core.basics.runner_vars import RunnerVar
from controller.core.basics.serials import serial_of
from controller.core.basics.timefmt import parse_time
from controller.core.jobs.job_env import job_env
from controller.core.jobs.run_report import ErrorKind
from runtime.jsonobj import Json

LONG_AGO = datetime.min.replace(tzinfo=UTC)


class Outcome(StrEnum):
    SUCCESS = "succeeded"
    FAILURE = "failed"  # counted toward backoff and the retry number
    INTERRUPTED = "interrupted"  # stopped from outside: counts nowhere
    BLOCKED = "blocked"  # the guard stopped a destructive plan: waits for approval
    PLAN_CHANGED = "plan-changed"  # the approved plan no longer matched: waits
    # A TerraformPolicy's Deny rule matched the plan: nothing applied, and nothing runs
    # again until the inputs or the policy set change (decide/denials.py).
    POLICY_DENIED = "policy-denied"


# The Event reason of a Job whose termination message was no result of its own: the
# controller recorded a failure of error kind `contract` in its place (termination.py).
INVALID_RESULT = "InvalidRunnerResult"

# Outcomes that count toward no backoff and no retry number.
FREE_OUTCOMES = frozenset(
    {Outcome.INTERRUPTED, Outcome.BLOCKED, Outcome.PLAN_CHANGED, Outcome.POLICY_DENIED}
)
# The Event of a blocked apply that a policy's RequireApproval rule held (its result's
# report says so), rather than the destructive guard.
POLICY_APPROVAL_EVENT = "PolicyApprovalRequired"


@dataclass(frozen=True)
class Classified:
    outcome: Outcome
    event: str | None  # the Event reason bookkeeping emits, if any
    message: str


def name_of(obj: Json) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def annotations_of(obj: Json) -> dict[str, str]:
    found: dict[str, str] = obj.get("metadata", {}).get("annotations") or {}
    return found


def labels_of(obj: Json) -> dict[str, str]:
    found: dict[str, str] = obj.get("metadata", {}).get("labels") or {}
    return found


_OPS = frozenset(op.value for op in Op)


def op_of(job: Json) -> str:
    """The Job's op from its label; failing that, from the `<name>-<op>-<hash8>` name (or a
    hand-made `<name>-<op>`); "" when neither says."""
    op = labels_of(job).get(LABEL_OP)
    if op:
        return op
    parts = name_of(job).rsplit("-", 2)
    for candidate in (parts[-2] if len(parts) >= 2 else "", parts[-1]):
        if candidate in _OPS:
            return candidate
    return ""


# The conditions the Job controller sets once a Job has finished (with status "True").
TERMINAL_CONDITIONS: Final = frozenset({"Complete", "Failed"})


def _terminal_condition(job: Json) -> Json | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in TERMINAL_CONDITIONS and cond.get("status") == "True":
            return dict(cond)
    return None


def is_finished(job: Json) -> bool:
    return _terminal_condition(job) is not None


def finished_at(job: Json) -> datetime | None:
    """completionTime, or else the terminal condition's lastTransitionTime; None while running.

    A finished Job that records neither (no API server writes one, but a hand-made
    snapshot may) finished no later than it started: startTime, else creationTimestamp,
    else as long ago as can be, so that no delay is counted from an unknown time."""
    cond = _terminal_condition(job)
    if cond is None:
        return None
    status = job.get("status") or {}
    for when in (
        status.get("completionTime"),
        cond.get("lastTransitionTime"),
        status.get("startTime"),
        job.get("metadata", {}).get("creationTimestamp"),
    ):
        if when:
            return parse_time(when)
    return LONG_AGO


def seq_of(job: Json) -> int:
    """The Job's attempt sequence (`captf.io/seq`); 0 when it records none."""
    return serial_of(annotations_of(job).get(ANN_SEQ)) or 0


def created_at(job: Json) -> datetime | None:
    created = job.get("metadata", {}).get("creationTimestamp")
    return parse_time(created) if created else None


def result(job: Json) -> Json | None:
    """The runner's result annotation, or None when missing or not a JSON object."""
    raw = annotations_of(job).get(ANN_RESULT)
    if raw is None:
        return None
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def error_kind_of(res: Json | None) -> str | None:
    """The error kind a result names, or None."""
    error = (res or {}).get("error")
    kind = error.get("kind") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None


def _failure_event(res: Json | None) -> str:
    return INVALID_RESULT if error_kind_of(res) == ErrorKind.CONTRACT else "JobFailed"


def inputs_hash_of(job: Json) -> str | None:
    """The inputs hash a Job ran with: its annotation, else its runner's
    RunnerVar.INPUTS_HASH; None when the Job records neither."""
    recorded = annotations_of(job).get(ANN_INPUTS_HASH)
    return recorded or job_env(job).get(RunnerVar.INPUTS_HASH) or None


def is_drift_remediation(job: Json) -> bool:
    return annotations_of(job).get(ANN_DRIFT_REMEDIATION) == "true"


def classify(job: Json, plan_secret_readable: bool = True) -> Classified:
    """The outcome of a finished Job, by the table of "Counting failures".

    `plan_secret_readable` says whether the Secret named by a plan Job's
    result could be read; a plan whose plan cannot be read is a failure, so
    the next plan backs off instead of looping."""
    cond = _terminal_condition(job)
    if cond is None:
        raise ValueError(f"Job {name_of(job)} has not finished")
    res = result(job)
    reported = res.get("outcome") if res else None
    message = str(res.get("message", "")) if res else ""
    if cond["type"] == "Complete":
        verdict = _classify_complete(job, reported, message, plan_secret_readable)
    else:
        verdict = _classify_failed(job, cond.get("reason"), reported, message)
    if verdict.event == "JobFailed" and res is not None:
        return Classified(verdict.outcome, _failure_event(res), verdict.message)
    return verdict


def _classify_complete(
    job: Json, reported: object, message: str, plan_secret_readable: bool
) -> Classified:
    name = name_of(job)
    if reported != Outcome.SUCCESS:
        why = "no result" if reported is None else f"outcome {reported!r}"
        # A result the controller recorded for an unreadable one says what was wrong with it.
        said = f" ({message})" if message and reported is not None else ""
        text = f"Job {name} completed with {why}{said}: the runner image broke the contract"
        return Classified(Outcome.FAILURE, "JobFailed", text)
    if traits(op_of(job)).result_is_plan and not plan_secret_readable:
        text = f"Job {name} succeeded but its plan Secret could not be read"
        return Classified(Outcome.FAILURE, "JobFailed", text)
    return Classified(Outcome.SUCCESS, None, message or f"Job {name} succeeded")


def _classify_failed(job: Json, reason: object, reported: object, message: str) -> Classified:
    name = name_of(job)
    error = (result(job) or {}).get("error")
    if (
        reason == "DeadlineExceeded"
        and isinstance(error, dict)
        and error.get("kind") == CANNOT_START
    ):
        # Ended by the controller: its pods could not be created or its image pulled.
        return Classified(
            Outcome.FAILURE, "JobCannotStart", message or f"Job {name} could not start"
        )
    if reason == "DeadlineExceeded":
        # Counted even when the runner says interrupted: a step that always hangs
        # must reach the cap instead of retrying at once forever.
        text = f"Job {name} was killed at its activeDeadlineSeconds"
        return Classified(Outcome.FAILURE, "JobDeadlineExceeded", text)
    if reason == "PodFailurePolicy":
        # Our only FailJob rule is on DisruptionTarget: an eviction or preemption.
        text = f"Job {name} was stopped by a disruption of its pod"
        return Classified(Outcome.INTERRUPTED, "JobInterrupted", text)
    if reported == Outcome.INTERRUPTED:
        return Classified(
            Outcome.INTERRUPTED, "JobInterrupted", message or f"Job {name} interrupted"
        )
    if reported == Outcome.BLOCKED:
        text = message or f"Job {name} found a destructive plan and changed nothing"
        return Classified(Outcome.BLOCKED, _blocked_event(job), text)
    if reported == Outcome.POLICY_DENIED:
        text = message or f"Job {name}: a policy denied the plan; nothing was changed"
        return Classified(Outcome.POLICY_DENIED, "PolicyDenied", text)
    if reported == Outcome.PLAN_CHANGED:
        text = message or f"Job {name}: the plan no longer matches the approved one"
        return Classified(Outcome.PLAN_CHANGED, None, text)
    why = message or ("no result" if reported is None else f"outcome {reported!r}")
    return Classified(Outcome.FAILURE, "JobFailed", f"Job {name} failed: {why}")


def _blocked_event(job: Json) -> str:
    """A policy's hold when the result's report asks for an approval; else the guard's."""
    report = (result(job) or {}).get("policy")
    asked = isinstance(report, dict) and report.get("verdict") == "approval-required"
    return POLICY_APPROVAL_EVENT if asked else "DestructivePlanBlocked"


def is_accounted(job: Json) -> bool:
    """Whether the Job carries the accounted mark: the one record that it was counted."""
    return annotations_of(job).get(ANN_ACCOUNTED) == "true"
