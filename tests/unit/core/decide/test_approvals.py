"""Which waiting Jobs their TerraformPlans approve: approved, current, and showing the
changes the Job's plan makes. The old annotation approves nothing."""

from __future__ import annotations

import pytest

from controller.core.basics.names import ANN_PLAN_SUMMARY
from controller.core.decide import snapshot
from controller.core.decide.approval_waits import awaiting_approval
from controller.core.decide.approvals import approved_jobs
from controller.core.decide.context import Context
from controller.core.decide.steps import context_of
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    approval,
    base_objects,
    captf,
    job,
    secret,
)

BLOCKED = job("apply", 1, "blocked", finished=ago(minutes=2), result={"planSecret": "b1"})
NAME = "c1-apply-00000001"


def _plan_secret(fingerprint: str) -> Json:
    kept = secret("b1", {"plan.json": "{}"})
    summary = f'{{"fingerprint": "{fingerprint}", "counts": {{"delete": 1}}, "resources": []}}'
    kept["metadata"]["annotations"] = {ANN_PLAN_SUMMARY: summary}
    return kept


def _ctx(*others: Json, annotations: dict[str, str] | None = None) -> Context:
    obj = captf(annotations=annotations)
    ctx = context_of(snapshot.build(obj, [*base_objects(), BLOCKED, *others]), NOW)
    assert isinstance(ctx, Context)
    return ctx


@pytest.mark.parametrize(
    ("others", "approved"),
    [
        ([approval(NAME), _plan_secret("sha256:f")], True),
        ([approval(NAME)], True),  # its plan Secret gone: the status is what was seen
        ([approval(NAME, approved=False), _plan_secret("sha256:f")], False),
        ([approval(NAME, {"size": 9}), _plan_secret("sha256:f")], False),  # other inputs
        ([approval(NAME), _plan_secret("sha256:other")], False),  # other changes
        ([approval(NAME, fingerprint="")], False),  # status not filled yet
        ([approval(NAME, phase="Superseded")], False),  # finished
        ([approval(NAME, phase="Applied")], False),
        ([approval(NAME, phase=None)], True),  # phase not written yet: not finished
        ([approval(NAME, owner="c2")], False),  # another object's plan
        ([approval("c1-apply-0000000f")], False),  # another Job's plan: nothing waits on it
    ],
)
def test_an_approval_counts_only_while_the_plan_is_current(
    others: list[Json], approved: bool
) -> None:
    ctx = _ctx(*others)
    assert (NAME in approved_jobs(ctx.snap, ctx.inputs.hash)) is approved
    assert awaiting_approval(ctx) == (None if approved else NAME)


def test_the_old_annotation_approves_nothing() -> None:
    ctx = _ctx(annotations={"captf.io/approve": NAME})
    assert approved_jobs(ctx.snap, ctx.inputs.hash) == frozenset()
    assert awaiting_approval(ctx) == NAME
