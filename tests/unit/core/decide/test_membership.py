"""A pool's members re-read (issue 30): every spec.membership.interval (60 s by default,
0 off) after its newest refresh, else its newest apply, plus its jitter; never a second
Job, never while paused or deleting; a failed re-read backs off as a refresh and is never
an apply's failure; an apply due comes first."""

from __future__ import annotations

import uuid
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_PAUSED, FINALIZER, POOL
from controller.core.decide.triggers import MEMBERSHIP, jitter
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    captf,
    decided,
    job,
)
from tests.unit.core.decide.test_schedule import DEFINITE, _member, _with_cluster


def _applied(seconds_ago: float) -> Json:
    return job(
        "apply",
        1,
        "succeeded",
        owner="m1",
        kind=POOL,
        finished=ago(seconds=seconds_ago),
        result=DEFINITE,
    )


def _pool(**spec: Json) -> Json:
    return captf(POOL, "m1", spec=spec) if spec else _member(POOL)


def test_a_pool_re_reads_its_members_a_minute_after_its_apply_and_its_jitter() -> None:
    late = jitter("uid-m1", MEMBERSHIP, 60)
    others = _with_cluster(_applied(60), kind=POOL)
    assert decided(_pool(), others, at=NOW + timedelta(seconds=late - 1)) == {
        "action": "idle",
        "after": 1.0,
    }
    out = decided(_pool(), others, at=NOW + timedelta(seconds=late))
    assert (out["action"], out["op"], out["reason"]) == ("run", "refresh", "MembershipRefreshDue")


def test_zero_turns_it_off_and_a_longer_interval_waits() -> None:
    others = _with_cluster(_applied(120), kind=POOL)
    assert decided(_pool(membership={"interval": "0"}), others) == {"action": "idle"}
    out = decided(_pool(membership={"interval": "5m"}), others)
    assert out["action"] == "idle"
    assert out["after"] > 170


def test_a_failed_re_read_backs_off_as_a_refresh_and_never_as_an_apply() -> None:
    failed = [
        job("refresh", n, "failed", owner="m1", kind=POOL, finished=ago(seconds=40 + 30 * n))
        for n in (1, 2, 3)
    ]
    # Due by the interval (the newest failure was 70 s ago), held by the refresh's backoff.
    out = decided(_pool(), _with_cluster(_applied(600), *failed, kind=POOL))
    assert out["reason"] == "MembershipRefreshDueBackoff"
    assert "LastApplyFailed" not in str(out)


def test_an_apply_due_comes_first() -> None:
    pool = _pool(variables={"size": 4})  # new inputs: the state's hash is the old one
    out = decided(pool, _with_cluster(_applied(600), kind=POOL))
    assert out["op"] == "apply"


@settings(max_examples=60, deadline=None)
@given(
    seconds_ago=st.floats(0, 3600),
    paused=st.booleans(),
    deleting=st.booleans(),
    busy=st.booleans(),
)
def test_the_re_read_never_runs_a_second_job_nor_while_paused_or_deleting(
    seconds_ago: float, paused: bool, deleting: bool, busy: bool
) -> None:
    pool = captf(
        POOL,
        "m1",
        annotations={ANN_PAUSED: ""} if paused else None,
        deleting=ago(1) if deleting else None,
        finalizers=[FINALIZER],
    )
    extra = [job("refresh", 2, None, owner="m1", kind=POOL, state="Running")] if busy else []
    out = decided(pool, _with_cluster(_applied(seconds_ago), *extra, kind=POOL))
    if busy or paused or deleting:
        assert out.get("reason") != "MembershipRefreshDue", out
    if out.get("reason") == "MembershipRefreshDue":
        assert seconds_ago >= 60


@given(st.uuids(), st.floats(60, 1e6))
def test_the_membership_jitter_is_under_a_tenth(uid: uuid.UUID, interval: float) -> None:
    late = jitter(str(uid), MEMBERSHIP, interval)
    assert 0.0 <= late < interval / 10 + 1e-3
