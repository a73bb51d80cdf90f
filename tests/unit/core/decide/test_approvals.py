"""A captf.io/approve that approves nothing is named, with why; one that works, or is
history, is not."""

from __future__ import annotations

import pytest

from controller.core.decide import snapshot
from controller.core.decide.approvals import ignored_approval
from controller.core.decide.context import Context
from controller.core.decide.steps import context_of
from tests.builders import NOW, Json, ago, base_objects, captf, job, secret


def _ctx(approve: str | None, jobs: list[Json], *, manual: bool = False) -> Context:
    spec = {"approval": {"mode": "Manual"}} if manual else {}
    obj = captf(annotations={"captf.io/approve": approve} if approve else None, spec=spec)
    ctx = context_of(snapshot.build(obj, [*base_objects(), *jobs]), NOW)
    assert isinstance(ctx, Context)
    return ctx


BLOCKED = job("apply", 1, "blocked", finished=ago(minutes=2))
FAILED = job("apply", 1, "failed", finished=ago(minutes=2))
RUNNING = job("apply", 2, None, state="Running")


@pytest.mark.parametrize(
    ("approve", "jobs", "why"),
    [
        (None, [BLOCKED], None),
        ("c1-apply-00000001", [BLOCKED], None),  # approves the waiting Job
        ("c1-apply-0000000x", [BLOCKED], "Job c1-apply-00000001 is the one waiting"),
        ("c1-apply-00000001", [FAILED], "it is a apply Job that failed; only a plan"),
        ("c1-apply-00000002", [FAILED, RUNNING], "that Job is still running"),
        ("c1-gone-00000000", [FAILED], None),  # nothing waits: history, not a mistake
    ],
)
def test_ignored_approvals(approve: str | None, jobs: list[Json], why: str | None) -> None:
    found = ignored_approval(_ctx(approve, jobs))
    if why is None:
        assert found is None
    else:
        assert found is not None
        assert why in found
        assert found.startswith(f"captf.io/approve={approve} approves nothing")


def test_approving_an_older_plan_names_the_newer_one() -> None:
    old = job("plan", 1, "succeeded", finished=ago(minutes=30), result={"planSecret": "p1"})
    new = job("plan", 2, "succeeded", finished=ago(minutes=1), result={"planSecret": "p2"})
    plans = [secret(name, {"plan.json": "{}"}) for name in ("p1", "p2")]
    ctx = _ctx("c1-plan-00000001", [old, new, *plans], manual=True)
    found = ignored_approval(ctx)
    assert found is not None
    assert "Job c1-plan-00000002 is the one waiting" in found
