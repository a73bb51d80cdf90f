from __future__ import annotations

import orjson

from controller.core.jobs.job import Outcome
from controller.runner.result import RunnerResult, bounded


def test_only_relevant_keys() -> None:
    body = orjson.loads(RunnerResult(outcome=Outcome.SUCCESS, message="ok", drift=False).to_json())
    assert body == {"outcome": "succeeded", "message": "ok", "drift": False}
    body = orjson.loads(
        RunnerResult(
            outcome=Outcome.FAILURE, message="x", state_serial=3, plan_secret="p"
        ).to_json()
    )
    assert body == {"outcome": "failed", "message": "x", "stateSerial": 3, "planSecret": "p"}


def test_exit_code_follows_outcome() -> None:
    assert RunnerResult(outcome=Outcome.SUCCESS).exit_code == 0
    for outcome in (Outcome.FAILURE, Outcome.INTERRUPTED, Outcome.BLOCKED, Outcome.PLAN_CHANGED):
        assert RunnerResult(outcome=outcome).exit_code == 1


def test_bounded_keeps_the_last_lines_within_limit() -> None:
    text = "\n".join(f"line {i}" for i in range(1000)) + "\n\n   \n"
    kept = bounded(text, limit=100)
    assert len(kept.encode()) <= 100
    assert kept.endswith("line 999")
    assert "line 990" in kept
    assert "\n\n" not in kept


def test_bounded_cuts_one_long_line_on_a_character_boundary() -> None:
    kept = bounded("é" * 100, limit=11)
    assert kept == "é" * 5


def test_the_result_fits_a_termination_message_by_shrinking_only_the_message() -> None:
    # Quotes and control characters take more room in JSON than in the message.
    noisy = "\n".join(f'warning {i}: "\t{"é" * 40}"' for i in range(500)) + "\nError: the cause"
    outputs = tuple(f"output_{i:03d}" for i in range(120))
    for result in (
        RunnerResult(outcome=Outcome.FAILURE, message=noisy),
        RunnerResult(outcome=Outcome.SUCCESS, message=noisy, state_serial=4, outputs=outputs),
    ):
        text = result.to_json()
        assert len(text.encode()) <= 4096
        body = orjson.loads(text)  # whole JSON, never cut
        assert body["outcome"] == result.outcome.value
        assert body["message"].endswith("Error: the cause")
        assert body.get("outputs") == (list(outputs) if result.outputs else None)


def test_a_result_too_large_without_its_message_is_a_failure_saying_so() -> None:
    outputs = tuple(f"output_{i:04d}_{'n' * 40}" for i in range(200))
    text = RunnerResult(
        outcome=Outcome.SUCCESS, message="applied", state_serial=7, outputs=outputs
    ).to_json()
    assert len(text.encode()) <= 4096
    assert orjson.loads(text) == {
        "outcome": "failed",
        "message": "the runner's result is larger than 4096 bytes",
        "stateSerial": 7,
        "error": {"kind": "internal"},
    }
