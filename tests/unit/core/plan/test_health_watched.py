"""The HealthWatched condition (controller/core/plan/health_watched.py): on a machine of
the contract, whether its health is watched, what the last telling reading said and the
unhealthy row it is in, and when the next reading is due; computed by the plan, so the
status shows what `captf decide` decides."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_PAUSED, FINALIZER, MACHINE, POOL
from controller.core.basics.timefmt import format_time
from controller.core.decide import snapshot
from controller.core.decide.decision import Run
from controller.core.decide.triggers import HEALTH, jitter
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests.builders import MODULE, NOW, ago, captf, job
from tests.unit.core.decide.test_background import budget
from tests.unit.core.decide.test_schedule import _member, _with_cluster

LATE = jitter("uid-m1", HEALTH, 300)


def _reading(health: str | None) -> Json:
    return {"stateSerial": 1, "contract": {"pending": [], "health": health}}


def _apply(seconds_ago: float, health: str | None = "running") -> Json:
    return job(
        "apply",
        1,
        "succeeded",
        owner="m1",
        kind=MACHINE,
        finished=ago(seconds=seconds_ago),
        result=_reading(health),
    )


def _refresh(seq: int, seconds_ago: float, health: str | None, outcome: str = "succeeded") -> Json:
    return job(
        "refresh",
        seq,
        outcome,
        owner="m1",
        kind=MACHINE,
        finished=ago(seconds=seconds_ago),
        result=_reading(health) if outcome == "succeeded" else None,
    )


def watched(machine: Json, *jobs: Json, at: datetime = NOW, module: Json | None = None) -> Json:
    others = _with_cluster(*jobs, module=module) if module else _with_cluster(*jobs)
    todo = plan_pass(snapshot.build(machine, others), at)
    assert todo.status is not None
    found = {c["type"]: c for c in todo.status.get("conditions") or []}
    return found.get("HealthWatched") or {}


def _watched_of(status: Json | None) -> Json:
    assert status is not None
    found: Json = {c["type"]: c for c in status["conditions"]}["HealthWatched"]
    return found


def _at(seconds_ago: float) -> str:
    return format_time(NOW - timedelta(seconds=seconds_ago))


@pytest.mark.parametrize(
    ("machine", "jobs", "status", "reason", "says"),
    [
        # Read running 60 s ago: the next reading 5 min after it, plus the jitter.
        (
            _member(),
            [_apply(60)],
            "True",
            "HealthWatched",
            [f"read running at {_at(60)}", f"next reading due at {_at(60 - 300 - LATE)}"],
        ),
        # Two unhealthy readings in a row: the row shown, the mark at three.
        (
            _member(),
            [_apply(200, "stopped"), _refresh(1, 100, "stopped")],
            "True",
            "HealthWatched",
            ["read stopped", "2 of 3 unhealthy readings in a row before the Machine is marked"],
        ),
        (
            _member(),
            [_apply(300, "stopped"), _refresh(1, 200, "stopped"), _refresh(2, 100, "degraded")],
            "True",
            "HealthWatched",
            [
                "read degraded",
                "3 readings in a row found the instance degraded: the Machine is marked",
            ],
        ),
        # A failed refresh: Unknown, the last telling reading, the retry after its delay.
        (
            _member(),
            [_apply(600), _refresh(1, 30, None, "failed")],
            "Unknown",
            "HealthReadingFailed",
            [
                f"refresh Job m1-refresh-00000001 failed at {_at(30)}",
                f"read running at {_at(600)}",
                f"next reading due at {_at(-30)}",  # the seed's first delay: 60 s
            ],
        ),
        # A refresh that told nothing (`unknown`): Unknown, and the watch reads again.
        (
            _member(),
            [_apply(200, "degraded"), _refresh(1, 100, "unknown")],
            "Unknown",
            "HealthReadingFailed",
            ["could not tell the health", "read degraded", "1 of 3 unhealthy readings"],
        ),
        # A refresh running: the reading is now.
        (
            _member(),
            [_apply(600), job("refresh", 1, None, owner="m1", kind=MACHINE, state="Running")],
            "True",
            "HealthWatched",
            ["a reading runs now"],
        ),
        # Due now: the pass starts it.
        (_member(), [_apply(400)], "True", "HealthWatched", ["a reading runs now"]),
        (
            captf(MACHINE, "m1", spec={"health": {"interval": "0"}}),
            [_apply(60)],
            "False",
            "HealthWatchOff",
            ["spec.health.interval is 0"],
        ),
        (
            captf(MACHINE, "m1", annotations={ANN_PAUSED: ""}),
            [_apply(60)],
            "False",
            "HealthWatchHeld",
            [ANN_PAUSED],
        ),
        (
            captf(MACHINE, "m1", spec={"suspend": True}),
            [_apply(600)],
            "False",
            "HealthWatchHeld",
            ["spec.suspend is true"],
        ),
        (_member(), [], "Unknown", "HealthNotRead", ["no apply has finished yet"]),
    ],
)
def test_the_condition_says_how_the_watch_reads(
    machine: Json, jobs: list[Json], status: str, reason: str, says: list[str]
) -> None:
    cond = watched(machine, *jobs)
    assert (cond["status"], cond["reason"]) == (status, reason), cond
    for text in says:
        assert text in cond["message"], cond["message"]


def test_a_deleting_machine_says_held() -> None:
    deleting = captf(MACHINE, "m1", deleting=ago(1), finalizers=[FINALIZER])
    cond = watched(deleting, _apply(60))
    assert (cond["status"], cond["reason"]) == ("False", "HealthWatchHeld")


def test_only_a_machine_of_the_contract_has_it() -> None:
    assert watched(_member(), _apply(60), module=MODULE) == {}
    pool = job("apply", 1, "succeeded", owner="m1", kind=POOL, result=_reading("running"))
    others = _with_cluster(pool, kind=POOL)
    todo = plan_pass(snapshot.build(_member(POOL), others), NOW)
    assert todo.status is not None
    assert "HealthWatched" not in {c["type"] for c in todo.status["conditions"]}


HEALTHS = st.sampled_from(["running", "stopped", "degraded", "unknown", None, "failed"])


@settings(max_examples=80, deadline=None)
@given(st.lists(HEALTHS, min_size=1, max_size=5), st.floats(0, 900), st.floats(0.5, 600))
def test_the_message_changes_with_a_reading_not_with_every_pass(
    healths: list[str | None], first: float, later: float
) -> None:
    """Two passes with no reading between them say the same, unless one starts a
    reading: the status is not rewritten (and the watch woken) for nothing."""
    n = len(healths)
    jobs = [_apply(60 * n + 60, "running")]
    for i, health in enumerate(healths, start=1):
        outcome = "failed" if health == "failed" else "succeeded"
        jobs.append(
            _refresh(i, 60 * (n - i) + 60, None if outcome == "failed" else health, outcome)
        )
    at = NOW + timedelta(seconds=first)
    one, two = (
        plan_pass(snapshot.build(_member(), _with_cluster(*jobs)), when)
        for when in (at, at + timedelta(seconds=later))
    )
    conds = [_watched_of(t.status) for t in (one, two)]
    if not isinstance(one.decision, Run) and not isinstance(two.decision, Run):
        assert conds[0]["message"] == conds[1]["message"]
    assert all(c["status"] in ("True", "Unknown") for c in conds)


def test_a_stretched_watch_says_how_often_and_whose_budget() -> None:
    """Issue 39: while the credentials' schedules are stretched to fit their budget, the
    message says the interval read and the budget it fits (the budget Lease holds the
    stretch; tests/unit/core/decide/test_background.py builds it)."""
    lease = budget([], stretch="2.4")
    lease["metadata"]["namespace"] = "default"  # the slots' namespace of the default settings
    others = _with_cluster(_apply(60), lease)
    todo = plan_pass(snapshot.build(_member(), others), NOW)
    assert todo.status is not None
    cond = {c["type"]: c for c in todo.status["conditions"]}["HealthWatched"]
    assert cond["message"].endswith("; every 12m (budget of secret default/creds: 60/min)")
    assert "every" not in watched(_member(), _apply(60))["message"]
