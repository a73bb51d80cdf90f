"""The Job status transitions, as a table: old status, event -> what is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.executor.status import (
    Created,
    Event,
    Exited,
    Lost,
    Reason,
    Running,
    Stopping,
    is_terminal,
    next_status,
)

Json = dict[str, Any]

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
START = "2026-03-01T12:00:00Z"
NOW = T0 + timedelta(seconds=42)
LATER = "2026-03-01T12:00:42Z"


def cond(kind: str, reason: str, when: str = LATER, message: str | None = None) -> Json:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message if message is not None else _default_message(reason),
        "lastProbeTime": when,
        "lastTransitionTime": when,
    }


def _default_message(reason: str) -> str:
    return {
        "CompletionsReached": "Reached expected number of succeeded pods",
        "BackoffLimitExceeded": "Job has reached the specified backoff limit",
        "DeadlineExceeded": "Job was active longer than specified deadline",
        "PodFailurePolicy": "Pod matched a FailJob rule of the pod failure policy",
    }[reason]


RUNNING: Json = {"startTime": START, "active": 1, "ready": 1, "terminating": 0}
CREATED: Json = {"startTime": START, "active": 1, "ready": 0, "terminating": 0}
STOPPING_DEADLINE: Json = {
    "startTime": START,
    "active": 0,
    "ready": 0,
    "terminating": 1,
    "conditions": [cond("FailureTarget", "DeadlineExceeded", START)],
}


def failed(reason: str, target_when: str = LATER, message: str | None = None) -> Json:
    return {
        "startTime": START,
        "active": 0,
        "ready": 0,
        "terminating": 0,
        "failed": 1,
        "conditions": [
            cond("FailureTarget", reason, target_when, message),
            cond("Failed", reason, LATER, message),
        ],
    }


COMPLETE: Json = {
    "startTime": START,
    "completionTime": LATER,
    "active": 0,
    "ready": 0,
    "terminating": 0,
    "succeeded": 1,
    "conditions": [
        cond("SuccessCriteriaMet", "CompletionsReached"),
        cond("Complete", "CompletionsReached"),
    ],
}

DRAIN = Stopping(Reason.POD_FAILURE_POLICY, "Pod ns/p has condition DisruptionTarget")

TABLE: list[tuple[str, Json | None, Event, Json | None]] = [
    ("created: startTime, active", None, Created(), {**CREATED, "startTime": LATER}),
    ("created twice: nothing", CREATED, Created(), None),
    ("running: ready", CREATED, Running(), RUNNING),
    ("running again: nothing", RUNNING, Running(), None),
    ("running after FailureTarget: nothing", STOPPING_DEADLINE, Running(), None),
    ("running before created: nothing", {}, Running(), None),
    ("exit 0: success criteria and complete", RUNNING, Exited(0), COMPLETE),
    ("exit 1: failure target and failed", RUNNING, Exited(1), failed("BackoffLimitExceeded")),
    (
        "deadline: FailureTarget, terminating",
        RUNNING,
        Stopping(Reason.DEADLINE),
        {**STOPPING_DEADLINE, "conditions": [cond("FailureTarget", "DeadlineExceeded")]},
    ),
    ("stopping twice: nothing", STOPPING_DEADLINE, Stopping(Reason.DEADLINE), None),
    (
        "exit after FailureTarget keeps its reason, even exit 0",
        STOPPING_DEADLINE,
        Exited(0),
        failed("DeadlineExceeded", target_when=START),
    ),
    (
        "exit of a stopped pod whose FailureTarget was never written",
        RUNNING,
        Exited(143, DRAIN),
        failed("PodFailurePolicy", message=DRAIN.message),
    ),
    (
        "lost: failed by backoff limit",
        RUNNING,
        Lost("gone"),
        failed("BackoffLimitExceeded", message="gone"),
    ),
    ("complete never changes", COMPLETE, Exited(1), None),
    ("failed never changes", failed("BackoffLimitExceeded"), Created(), None),
    ("failed is not re-failed", failed("DeadlineExceeded"), Lost("gone"), None),
]


@pytest.mark.parametrize(
    ("old", "event", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_transition(old: Json | None, event: Event, expected: Json | None) -> None:
    assert next_status(old, event, NOW) == expected


def test_a_stop_before_the_start_was_written_still_has_a_start_time() -> None:
    # The server rejects a finished Job without startTime.
    status = next_status({}, Exited(1, Stopping(Reason.DEADLINE)), NOW)
    assert status is not None
    assert status["startTime"] == LATER
    assert is_terminal(status)


def test_completion_time_is_never_before_start_time() -> None:
    # A start written by a clock ahead of ours (another executor, a scaled clock).
    ahead = {**RUNNING, "startTime": "2026-03-01T13:00:00Z"}
    status = next_status(ahead, Exited(0), NOW)
    assert status is not None
    assert status["completionTime"] == "2026-03-01T13:00:00Z"


def test_the_old_status_is_not_modified() -> None:
    old = {**RUNNING, "conditions": []}
    snapshot = {**old, "conditions": []}
    next_status(old, Exited(1), NOW)
    assert old == snapshot


def test_other_conditions_are_kept() -> None:
    other = {"type": "Suspended", "status": "False", "reason": "JobResumed"}
    status = next_status({**RUNNING, "conditions": [other]}, Exited(0), NOW)
    assert status is not None
    assert status["conditions"][0] == other
    assert [c["type"] for c in status["conditions"]] == [
        "Suspended",
        "SuccessCriteriaMet",
        "Complete",
    ]


def test_counters_add_to_earlier_ones() -> None:
    status = next_status({**RUNNING, "failed": 2}, Exited(1), NOW)
    assert status is not None
    assert status["failed"] == 3
