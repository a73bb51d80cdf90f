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
