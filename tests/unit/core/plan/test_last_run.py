"""status.lastRun, derived from the newest finished Job and the result recorded on it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controller.core.basics.redact import REDACTED, redactor
from controller.core.decide import snapshot
from controller.core.jobs.history import History
from controller.core.jobs.termination import NOT_JSON, result_of
from controller.core.plan.last_run import last_run_of
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests import builders as b

STEPS = [
    {"name": "init", "exitCode": 0, "seconds": 1.5},
    {"name": "plan", "exitCode": 0, "seconds": 2.25},
    {"name": "apply", "exitCode": 1, "seconds": 30},
]
APPLY_FAILED: Json = {
    "message": "tofu apply failed (exit 1):\nError: creating thing: quota",
    "stateSerial": 2,
    "runtimeVersion": "1.9.0",
    "steps": STEPS,
    "error": {"kind": "apply", "summary": "creating thing: quota"},
}


def _history(*jobs: Json) -> History:
    return History(jobs, lambda _job: True)


def _none(_job: Json) -> Any:
    return redactor([])


def test_a_failed_apply_reports_its_steps_kind_and_summary() -> None:
    job = b.job("apply", 1, "failed", finished=b.ago(minutes=2), result=APPLY_FAILED)
    run = last_run_of(_history(job), _none)
    assert run == {
        "job": job["metadata"]["name"],
        "op": "apply",
        "result": "failed",
        "startedAt": b.ts(b.ago(minutes=2, seconds=30)),
        "finishedAt": b.ts(b.ago(minutes=2)),
        "runtimeVersion": "1.9.0",
        "errorKind": "apply",
        "summary": "creating thing: quota",
        "steps": STEPS,
    }


def test_a_success_shows_no_error_and_no_summary() -> None:
    result = {"runtimeVersion": "1.9.0", "steps": STEPS[:2], "message": "applied"}
    run = last_run_of(_history(b.job("apply", 1, "succeeded", result=result)), _none)
    assert run is not None
    assert run["result"] == "succeeded"
    assert "errorKind" not in run
    assert "summary" not in run
    assert run["steps"] == STEPS[:2]


@pytest.mark.parametrize(
    ("job", "kind", "summary"),
    [
        (b.job("apply", 1, None), "contract", "the Job finished without a result"),
        (
            b.job("apply", 1, "interrupted", reason="DeadlineExceeded"),
            "timeout",
            "killed at the Job's activeDeadlineSeconds",
        ),
        (b.job("apply", 1, None, raw_result=result_of("}{", "u")), "contract", NOT_JSON),
        (b.job("apply", 1, "interrupted"), None, None),
        (b.job("apply", 1, "blocked"), None, None),
        # A runner from before error kinds: the outcome alone.
        (b.job("apply", 1, "failed", result={"message": "x"}), None, None),
    ],
    ids=["no result", "deadline", "unreadable", "interrupted", "blocked", "older runner"],
)
def test_the_controller_names_what_the_runner_could_not(
    job: Json, kind: str | None, summary: str | None
) -> None:
    run = last_run_of(_history(job), _none)
    assert run is not None
    assert run.get("errorKind") == kind
    assert run.get("summary") == summary


def test_the_newest_finished_job_reports_whatever_its_op() -> None:
    failed = b.job("apply", 1, "failed", finished=b.ago(minutes=9), result=APPLY_FAILED)
    drift = b.job("drift", 2, "succeeded", finished=b.ago(minutes=1), result={"drift": False})
    run = last_run_of(_history(failed, drift), _none)
    assert run is not None
    assert (run["op"], run["result"]) == ("drift", "succeeded")


def test_pruned_jobs_leave_the_status_as_it_was_and_an_older_job_never_wins() -> None:
    shown = {"job": "c1-apply-00000009", "op": "apply", "finishedAt": b.ts(b.ago(minutes=1))}
    assert last_run_of(_history(), _none, shown) == shown
    older = b.job("apply", 1, "failed", finished=b.ago(minutes=5), result=APPLY_FAILED)
    assert last_run_of(_history(older), _none, shown) == shown
    assert last_run_of(_history(), _none, None) is None


def test_the_summary_is_redacted_with_the_values_the_job_carried() -> None:
    result = APPLY_FAILED | {"error": {"kind": "apply", "summary": "denied for horsebattery"}}
    job = b.job("apply", 1, "failed", result=result)
    run = last_run_of(_history(job), lambda _job: redactor(["horsebattery"]))
    assert run is not None
    assert run["summary"] == f"denied for {REDACTED}"


def test_steps_not_shaped_as_steps_are_not_shown() -> None:
    bad = APPLY_FAILED | {"steps": [{"name": "init", "exitCode": "0", "seconds": 1}]}
    run = last_run_of(_history(b.job("apply", 1, "failed", result=bad)), _none)
    assert run is not None
    assert "steps" not in run


def test_the_status_write_carries_last_run_and_a_second_pass_changes_nothing() -> None:
    job = b.job("apply", 1, "failed", finished=b.ago(minutes=2), result=APPLY_FAILED)
    snap = snapshot.build(b.captf(), [*b.base_objects(), job])
    first = plan_pass(snap, b.NOW)
    assert first.status is not None
    assert first.status["lastRun"]["errorKind"] == "apply"
    written = b.captf(status=snap.status | first.status)
    # Derived from the Job alone: a restarted controller computes the same value.
    again = plan_pass(snapshot.build(written, [*b.base_objects(), job]), b.NOW)
    assert "lastRun" not in (again.status or {})
    assert orjson.dumps(first.status["lastRun"])  # plain JSON


THROTTLED: Json = APPLY_FAILED | {
    "error": {
        "kind": "cloud-throttled",
        "summary": "creating EC2 VPC: operation error EC2: CreateVpc, …",
        "signal": "aws:RequestLimitExceeded",
    }
}


def test_a_cloud_error_shows_its_kind_and_signal_in_last_run_and_the_apply_condition() -> None:
    job = b.job("apply", 1, "failed", finished=b.ago(minutes=2), result=THROTTLED)
    run = last_run_of(_history(job), _none)
    assert run is not None
    assert (run["errorKind"], run["signal"]) == ("cloud-throttled", "aws:RequestLimitExceeded")
    snap = snapshot.build(b.captf(), [*b.base_objects(), job])
    status = plan_pass(snap, b.NOW).status
    assert status is not None
    [applied] = [c for c in status["conditions"] if c["type"] == "ApplyJobSucceeded"]
    assert applied["reason"] == "ApplyFailed"
    assert applied["message"].startswith("cloud-throttled (aws:RequestLimitExceeded): Job c1-apply")


@pytest.mark.parametrize(
    "error",
    [
        {"kind": "apply", "summary": "x", "signal": "aws:RequestLimitExceeded"},  # not its kind
        {"kind": "cloud-throttled", "summary": "x", "signal": "aws:ExpiredToken"},
    ],
)
def test_a_signal_the_table_does_not_give_that_kind_is_never_shown(error: Json) -> None:
    job = b.job("apply", 1, "failed", result=APPLY_FAILED | {"error": error})
    run = last_run_of(_history(job), _none)
    assert run is not None
    assert "signal" not in run
    snap = snapshot.build(b.captf(), [*b.base_objects(), job])
    status = plan_pass(snap, b.NOW).status
    assert status is not None
    [applied] = [c for c in status["conditions"] if c["type"] == "ApplyJobSucceeded"]
    assert applied["message"].startswith("Job c1-apply")
