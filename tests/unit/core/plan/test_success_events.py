"""The Event a successful Job is accounted with, by op."""

from __future__ import annotations

import pytest

from controller.core.basics.names import ANN_DRIFT_REMEDIATION
from controller.core.jobs.history import History
from controller.core.plan.accounting import success_event
from tests.builders import job


@pytest.mark.parametrize(
    ("op", "result", "annotations", "reason"),
    [
        ("apply", {}, {}, "Applied"),
        ("apply", {}, {ANN_DRIFT_REMEDIATION: "true"}, "DriftRemediated"),
        ("drift", {"drift": True}, {}, "DriftDetected"),
        ("drift", {"drift": False}, {}, None),
        ("refresh", {}, {}, None),
        ("destroy", {}, {}, "Destroyed"),
        ("restore", {}, {}, "Restored"),
        ("plan", {"planSecret": "p"}, {}, "PlanReady"),
    ],
)
def test_successes_by_op(
    op: str, result: dict[str, object], annotations: dict[str, str], reason: str | None
) -> None:
    [record] = History(
        [job(op, 1, "succeeded", result={"message": "done"} | result, annotations=annotations)],
        lambda _j: True,
    )
    event = success_event(record)
    assert (event[0] if event else None) == reason
    if event is not None and reason != "PlanReady":
        assert event[1] == "done"


def test_a_plan_says_how_to_approve_it() -> None:
    [record] = History(
        [job("plan", 1, "succeeded", result={"message": "planned"})], lambda _j: True
    )
    event = success_event(record)
    assert event == ("PlanReady", "planned; approve TerraformPlan c1-plan-00000001 to apply it")


@pytest.mark.parametrize("outcome", ["failed", "interrupted", "blocked", "plan-changed"])
def test_nothing_but_a_success_gets_one(outcome: str) -> None:
    [record] = History([job("apply", 1, outcome)], lambda _j: True)
    assert success_event(record) is None
