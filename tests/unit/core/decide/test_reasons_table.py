"""The reasons users see are part of the API: every example snapshot prints, and every
case of a fixed generated table decides and launches, exactly what
`reasons_table.jsonl` recorded (on main before the guards became one list, issue 38).
A change here is a change of behaviour: regenerate the table only when it is meant
(reasons_cases.py says how)."""

from __future__ import annotations

import orjson
import pytest

from tests.paths import REPO
from tests.unit.core.decide.reasons_cases import Case, cases, example_rows, row

TABLE = REPO / "tests" / "unit" / "core" / "decide" / "reasons_table.jsonl"
RECORDED = [orjson.loads(line) for line in TABLE.read_bytes().splitlines()]
BY_CASE = {line["case"]: line for line in RECORDED}


def test_the_table_covers_the_waits_between_a_due_op_and_its_job() -> None:
    reasons = {line["decision"].get("reason") for line in RECORDED if "decision" in line}
    assert {
        "WaitingForRunLease",
        "WaitingForClusterOperation",
        "WaitingForMachineOperations",
        "OutsideChangeWindow",
        "Suspended",
        "JobRefused",
        "RunnerRBACNotReady",
        "ImageResolving",
        "InputsChangedBackoff",
        "WaitingForBackgroundBudget",
    } <= reasons
    assert sum("claims" in line for line in RECORDED) >= 50


def test_every_example_prints_the_line_it_printed() -> None:
    for line in example_rows():
        assert line == BY_CASE[line["case"]]


@pytest.mark.parametrize("case", list(cases()), ids=lambda case: case.name)
def test_every_generated_case_decides_and_launches_as_recorded(case: Case) -> None:
    line = row(case)
    assert line == BY_CASE[line["case"]]
