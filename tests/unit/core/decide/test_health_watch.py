"""The health watch (issue 30): a Ready machine's health is re-read every
spec.health.interval (5 min by default, 0 off), late by its jitter; never a second Job,
never while paused or deleting, and the jitter stays under a tenth of the interval."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_PAUSED, FINALIZER, MACHINE, POOL
from controller.core.decide.triggers import HEALTH, jitter
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    captf,
    decided,
    job,
)
from tests.unit.core.decide.test_schedule import DEFINITE, _member, _with_cluster

UNHEALTHY = {"stateSerial": 1, "contract": {"pending": [], "health": "stopped"}}


def _applied(seconds_ago: float, result: Json = DEFINITE) -> Json:
    return job(
        "apply",
        1,
        "succeeded",
        owner="m1",
        kind=MACHINE,
        finished=ago(seconds=seconds_ago),
        result=result,
    )


def test_a_ready_machine_is_re_read_after_five_minutes_and_its_jitter() -> None:
    late = jitter("uid-m1", HEALTH, 300)
    others = _with_cluster(_applied(300))
    assert decided(_member(), others, at=NOW + timedelta(seconds=late - 1)) == {
        "action": "idle",
        "after": 1.0,
    }
    out = decided(_member(), others, at=NOW + timedelta(seconds=late))
    assert (out["action"], out["op"], out["reason"]) == ("run", "refresh", "HealthCheckDue")


@pytest.mark.parametrize(
    ("health", "due"),
    [
        ({"interval": "0"}, False),
        ({"interval": "0s"}, False),
        ({"interval": "1h"}, False),
        ({}, True),
    ],
)
def test_the_interval_is_a_field_and_zero_turns_it_off(health: Json, due: bool) -> None:
    machine = captf(MACHINE, "m1", spec={"health": health})
    out = decided(machine, _with_cluster(_applied(400)), at=NOW + timedelta(seconds=40))
    assert (out.get("reason") == "HealthCheckDue") is due, out


def test_a_pool_is_not_watched_so() -> None:
    applied = job(
        "apply", 1, "succeeded", owner="m1", kind=POOL, finished=ago(3600), result=DEFINITE
    )
    out = decided(_member(POOL), _with_cluster(applied, kind=POOL), at=NOW)
    assert out.get("reason") != "HealthCheckDue"


def test_a_failed_re_read_backs_off_and_a_running_one_is_awaited() -> None:
    failed = job("refresh", 1, "failed", owner="m1", kind=MACHINE, finished=ago(seconds=5))
    out = decided(_member(), _with_cluster(_applied(900), failed))
    assert out["reason"] == "HealthCheckDueBackoff"
    running = job("refresh", 2, None, owner="m1", kind=MACHINE, state="Running")
    assert decided(_member(), _with_cluster(_applied(900), running))["reason"] == "JobRunning"


@settings(max_examples=60, deadline=None)
@given(
    seconds_ago=st.floats(0, 7200),
    paused=st.booleans(),
    deleting=st.booleans(),
    busy=st.booleans(),
    health=st.sampled_from([DEFINITE, UNHEALTHY]),
)
def test_the_watch_never_runs_a_second_job_nor_while_paused_or_deleting(
    seconds_ago: float, paused: bool, deleting: bool, busy: bool, health: Json
) -> None:
    notes = {ANN_PAUSED: ""} if paused else None
    machine = captf(
        MACHINE,
        "m1",
        annotations=notes,
        deleting=ago(1) if deleting else None,
        finalizers=[FINALIZER],
    )
    extra = [job("refresh", 2, None, owner="m1", kind=MACHINE, state="Running")] if busy else []
    out = decided(machine, _with_cluster(_applied(seconds_ago, health), *extra))
    if busy or paused or deleting:
        assert out.get("reason") != "HealthCheckDue", out
    if out.get("reason") == "HealthCheckDue":
        assert seconds_ago >= 300


@given(st.uuids(), st.floats(60, 1e7))
def test_the_health_jitter_is_under_a_tenth_and_fixed_per_object(
    uid: uuid.UUID, interval: float
) -> None:
    late = jitter(str(uid), HEALTH, interval)
    assert 0.0 <= late < interval / 10 + 1e-3
    assert late == jitter(str(uid), HEALTH, interval)


@pytest.mark.parametrize("kind", ["TerraformCluster", POOL, MACHINE])
def test_drift_checks_are_on_by_default_every_thirty_minutes(kind: str) -> None:
    """Issue 30: an object without spec.drift.interval checks 30 min after its newest
    check or apply, plus its jitter; `0` turns that off."""
    name = "c1" if kind == "TerraformCluster" else "m1"
    obj = captf(
        kind,
        name,
        spec={"drift": None, "health": {"interval": "0"}, "membership": {"interval": "0"}},
    )
    applied = job("apply", 1, "succeeded", owner=name, kind=kind, finished=ago(1), result=DEFINITE)
    others = _with_cluster(applied, kind=kind) if name == "m1" else _cluster_objects(obj, applied)
    late = jitter(obj["metadata"]["uid"], "drift", 1800)
    due = NOW + timedelta(seconds=1800 - 60 + late)
    assert decided(obj, others, at=due - timedelta(seconds=1)) == {"action": "idle", "after": 1.0}
    assert decided(obj, others, at=due)["reason"] == "DriftCheckDue"
    off = captf(
        kind,
        name,
        spec={
            "drift": {"interval": "0"},
            "health": {"interval": "0"},
            "membership": {"interval": "0"},
        },
    )
    assert decided(off, others, at=due + timedelta(hours=5)) == {"action": "idle"}


def _cluster_objects(obj: Json, applied: Json) -> list[Json]:
    from tests.builders import base_objects
    from tests.unit.core.decide.test_schedule import _speaking

    return _speaking(obj, [*base_objects(), applied])


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        # Nobody could tell, or the result carried no reading: only the watch reads again.
        ({"stateSerial": 1, "contract": {"pending": [], "health": "unknown"}}, "HealthCheckDue"),
        ({"stateSerial": 1}, "HealthCheckDue"),
        # An output still to come beside a definite health: the watch too.
        (
            {"stateSerial": 1, "contract": {"pending": ["addresses"], "health": "running"}},
            "HealthCheckDue",
        ),
        # Health pending: HealthPending's schedule (30 s doubling) reads it, not the watch.
        ({"stateSerial": 1, "contract": {"pending": [], "health": "pending"}}, "HealthPending"),
        ({"stateSerial": 1, "contract": {"pending": [], "health": None}}, "HealthPending"),
    ],
)
def test_a_reading_that_is_not_definite_is_still_read_again(result: Json, reason: str) -> None:
    """Before, the watch stopped at a reading that was not definite, and a machine whose
    module once said `unknown` was never read again."""
    refreshed = job(
        "refresh",
        1,
        "succeeded",
        owner="m1",
        kind=MACHINE,
        finished=ago(seconds=400),
        result=result,
    )
    out = decided(_member(), _with_cluster(_applied(900), refreshed))
    assert (out.get("op"), out.get("reason")) == ("refresh", reason), out


def _drift(seconds_ago: float, outcome: str = "succeeded", result: Json | None = None) -> Json:
    return job(
        "drift",
        1,
        outcome,
        owner="m1",
        kind=MACHINE,
        finished=ago(seconds=seconds_ago),
        result=result,
    )


@pytest.mark.parametrize(
    ("others", "decision"),
    [
        # The drift check comes due within the next five minutes: it reads the health now,
        # one Job where there were two (issue 39).
        ([_applied(1700)], ("run", "drift", "HealthCheckDue")),
        # Half an hour off: the re-read is a refresh of its own.
        ([_applied(900)], ("run", "refresh", "HealthCheckDue")),
        # A drift check that found no drift read the health: the watch counts from it.
        ([_applied(1700), _drift(60, result={"drift": False, **DEFINITE})], ("idle", None, None)),
        # One that found drift read nothing the watch counts; nor does a failed one, which
        # backs off on its own while the health is read by a refresh.
        (
            [_applied(1700), _drift(60, result={"drift": True})],
            ("run", "refresh", "HealthCheckDue"),
        ),
        ([_applied(3400), _drift(1700, "failed")], ("run", "refresh", "HealthCheckDue")),
    ],
)
def test_a_drift_check_answers_the_health_re_read(
    others: list[Json], decision: tuple[str, str | None, str | None]
) -> None:
    drifting = captf(MACHINE, "m1", spec={"drift": {"interval": "30m"}})
    out = decided(drifting, _with_cluster(*others), at=NOW + timedelta(seconds=40))
    assert (out["action"], out.get("op"), out.get("reason")) == decision, out
    # With drift checks off, the health is always read by a refresh of its own.
    if decision[1] == "drift":
        assert (
            decided(_member(), _with_cluster(*others), at=NOW + timedelta(seconds=40))["op"]
            == "refresh"
        )
