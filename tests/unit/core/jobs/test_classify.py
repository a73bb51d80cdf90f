"""The outcome table of "Counting failures", row by row."""

from __future__ import annotations

import pytest

from controller.core.jobs.job import Outcome, classify, finished_at, is_finished
from tests.builders import ago, job

# (description, job, plan secret readable, outcome, event)
ROWS = [
    ("complete, succeeded", job("apply", 1, "succeeded"), True, Outcome.SUCCESS, None),
    ("complete plan, plan readable", job("plan", 1, "succeeded"), True, Outcome.SUCCESS, None),
    (
        "complete, no result: contract broken",
        job("apply", 1, None, state="Complete"),
        True,
        Outcome.FAILURE,
        "JobFailed",
    ),
    (
        "complete, unparseable result",
        job("apply", 1, None, state="Complete", raw_result="{not json"),
        True,
        Outcome.FAILURE,
        "JobFailed",
    ),
    (
        "complete, result not an object",
        job("apply", 1, None, state="Complete", raw_result='["succeeded"]'),
        True,
        Outcome.FAILURE,
        "JobFailed",
    ),
    (
        "complete, unknown outcome",
        job("apply", 1, "great", state="Complete"),
        True,
        Outcome.FAILURE,
        "JobFailed",
    ),
    (
        "complete plan, plan Secret unreadable",
        job("plan", 1, "succeeded"),
        False,
        Outcome.FAILURE,
        "JobFailed",
    ),
    (
        "failed, deadline, runner said interrupted",
        job("apply", 1, "interrupted", reason="DeadlineExceeded"),
        True,
        Outcome.FAILURE,
        "JobDeadlineExceeded",
    ),
    (
        "failed, deadline, no result",
        job("apply", 1, None, reason="DeadlineExceeded"),
        True,
        Outcome.FAILURE,
        "JobDeadlineExceeded",
    ),
    (
        "failed, interrupted",
        job("apply", 1, "interrupted"),
        True,
        Outcome.INTERRUPTED,
        "JobInterrupted",
    ),
    (
        "failed, pod failure policy, no result",
        job("apply", 1, None, reason="PodFailurePolicy"),
        True,
        Outcome.INTERRUPTED,
        "JobInterrupted",
    ),
    (
        "failed, pod failure policy, runner said failed",
        job("apply", 1, "failed", reason="PodFailurePolicy"),
        True,
        Outcome.INTERRUPTED,
        "JobInterrupted",
    ),
    (
        "failed, blocked",
        job("apply", 1, "blocked"),
        True,
        Outcome.BLOCKED,
        "DestructivePlanBlocked",
    ),
    ("failed, plan-changed", job("apply", 1, "plan-changed"), True, Outcome.PLAN_CHANGED, None),
    ("failed, failed", job("apply", 1, "failed"), True, Outcome.FAILURE, "JobFailed"),
    ("failed, no result", job("apply", 1, None), True, Outcome.FAILURE, "JobFailed"),
    (
        "failed, unparseable result",
        job("apply", 1, None, raw_result="nope"),
        True,
        Outcome.FAILURE,
        "JobFailed",
    ),
]


@pytest.mark.parametrize(
    ("job_", "readable", "outcome", "event"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_outcome_table(
    job_: dict[str, object], readable: bool, outcome: Outcome, event: str | None
) -> None:
    verdict = classify(job_, plan_secret_readable=readable)
    assert verdict.outcome == outcome
    assert verdict.event == event
    assert verdict.message


def test_running_job_is_not_classified() -> None:
    running = job("apply", 1, None, state="Running")
    assert not is_finished(running)
    assert finished_at(running) is None
    with pytest.raises(ValueError, match="has not finished"):
        classify(running)


def test_finish_time_prefers_completion_time_then_condition() -> None:
    done = job("apply", 1, "succeeded", finished=ago(minutes=5))
    assert finished_at(done) == ago(minutes=5)
    failed = job("apply", 2, "failed", finished=ago(minutes=7))
    assert "completionTime" not in failed["status"]
    assert finished_at(failed) == ago(minutes=7)
