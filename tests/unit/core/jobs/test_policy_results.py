"""The result keys of a judged plan: `changes` and `policy` are accepted only in their
shape, and both pass the redaction of the values the Job carried, in the runner and in
the controller alike."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from controller.core.basics.changes import changes_of
from controller.core.basics.redact import redactor
from controller.core.jobs.job import Outcome
from controller.core.jobs.policy_report import Verdict, Violation, bounded
from controller.core.jobs.termination import NOT_A_RESULT, redacted, result_of
from controller.runner.main import report
from controller.runner.result import RunnerResult

TOKEN = "s3cr3t-t0ken-value"


def body(**extra: object) -> str:
    return orjson.dumps({"outcome": "policy-denied", "message": "m", **extra}).decode()


@pytest.mark.parametrize(
    "extra",
    [
        {"changes": {"create": 1, "update": 0, "replace": 0, "delete": 0}},
        {"changes": {"create": 1, "addresses": {"create": ["a"]}}},
        {"policy": {"verdict": "compliant"}},
        {
            "policy": {
                "verdict": "denied",
                "violations": [
                    {"policy": "p", "rule": "r", "action": "Deny", "why": "matched", "message": "m"}
                ],
                "total": 1,
            }
        },
    ],
)
def test_well_shaped_keys_are_kept(extra: dict[str, object]) -> None:
    value = body(**extra)
    assert result_of(value, "uid") == value


@pytest.mark.parametrize(
    "extra",
    [
        {"changes": {"create": -1}},
        {"changes": {"create": 1, "values": [1]}},
        {"changes": {"addresses": {"create": ["a"] * 21}}},
        {"policy": {"verdict": "maybe"}},
        {"policy": {"verdict": "denied", "violations": [{"policy": "p"}]}},
        {"policy": {"verdict": "denied", "after": {"password": "x"}}},
    ],
)
def test_anything_else_is_no_result(extra: dict[str, object]) -> None:
    assert NOT_A_RESULT in result_of(body(**extra), "uid")


def _leaky() -> RunnerResult:
    found = changes_of([(f'terraform_data.x["{TOKEN}"]', "create")])
    violation = Violation("p", "r", "Deny", "matched", f"no {TOKEN}", (f'x["{TOKEN}"]',), 1)
    return RunnerResult(
        outcome=Outcome.POLICY_DENIED,
        message=f"denied {TOKEN}",
        changes=found,
        policy=bounded(Verdict.DENIED, [violation]),
    )


def test_the_controller_redacts_what_it_records() -> None:
    recorded = redacted(_leaky().to_json(), redactor({TOKEN}))
    assert TOKEN not in recorded
    assert "(redacted)" in orjson.loads(recorded)["changes"]["addresses"]["create"][0]


def test_the_runner_redacts_what_it_writes(tmp_path: Path) -> None:
    path = tmp_path / "termination-log"
    report(str(path), _leaky(), redactor({TOKEN}))
    written = path.read_text()
    assert TOKEN not in written
    assert orjson.loads(written)["policy"]["violations"][0]["addresses"] == ['x["(redacted)"]']
