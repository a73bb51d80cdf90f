"""The schedule's rules: the jitter of drift and refresh, the refresh after a member's
apply whose contract reading was not definite, and refreshes while health is pending."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.names import MACHINE, POOL
from controller.core.basics.timefmt import format_time
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
from controller.core.decide.triggers import jitter
from controller.core.jobs.readings import Reading, reading_of
from tests.builders import (
    NOW,
    Json,
    ago,
    base_objects,
    captf,
    current_hash,
    decided,
    job,
    owners_of,
    state,
)

PENDING = {"stateSerial": 1, "contract": {"pending": ["provider_id"], "health": "pending"}}
DEFINITE = {"stateSerial": 1, "contract": {"pending": [], "health": "running"}}
HEALTH_PENDING = {"contract": {"pending": [], "health": "pending"}}


@given(st.uuids(), st.sampled_from(["drift", "refresh"]), st.floats(60, 1e9))
def test_the_jitter_is_within_a_tenth_of_the_interval_and_fixed_by_the_uid(
    uid: uuid.UUID, op: str, interval: float
) -> None:
    late = jitter(str(uid), op, interval)
    assert 0.0 <= late <= interval / 10
    assert late == jitter(str(uid), op, interval)


def test_the_jitter_spreads_objects_over_the_tenth() -> None:
    lates = [jitter(f"uid-{i}", "drift", 3600) for i in range(1000)]
    buckets = [0] * 10
    for late in lates:
        buckets[min(int(late / 36), 9)] += 1
    assert all(60 <= b <= 140 for b in buckets), buckets  # about 100 in each 36 s bucket
    assert jitter("", "drift", 3600) == 0.0  # no uid (a hand-made snapshot): none


def test_the_jitter_moves_the_drift_check() -> None:
    obj = captf(spec={"drift": {"interval": "1h"}})
    others = [*base_objects(), job("drift", 1, "succeeded", finished=ago(60), result={})]
    late = jitter("uid-c1", "drift", 3600)
    assert decided(obj, others, at=NOW + _s(late - 1)) == {"action": "idle", "after": 1.0}
    assert decided(obj, others, at=NOW + _s(late))["reason"] == "DriftCheckDue"


def test_a_moved_object_without_history_checks_after_its_creation_and_jitter() -> None:
    # After a move the status is gone and so are the Jobs: the object's creation (the move)
    # plus its jitter, so that moved objects do not all check at once.
    obj = captf(spec={"refresh": {"interval": "1h"}})
    obj["metadata"]["creationTimestamp"] = _iso(NOW)
    late = jitter("uid-c1", "refresh", 3600)
    assert decided(obj, base_objects()) == {"action": "idle", "after": late}


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def _iso(when: datetime) -> str:
    return format_time(when)


def _member(kind: str = MACHINE) -> Json:
    return captf(kind, "m1")


def _with_cluster(*objects: Json, kind: str = MACHINE) -> list[Json]:
    """The member's module, credentials and state, its TerraformCluster, and the Cluster API
    objects it acts for (its owner, their Cluster, the bootstrap data)."""
    module = base_objects("m1", applied=False)[1:]
    module_and_state = [*module, state("m1", serial=1, inputs=current_hash(), kind=kind)]
    return [*module_and_state, captf(ready=True), *owners_of(_member(kind)), *objects]


@pytest.mark.parametrize("kind", [MACHINE, POOL])
def test_a_refresh_follows_a_members_apply_whose_outputs_were_not_definite(kind: str) -> None:
    applied = job("apply", 1, "succeeded", owner="m1", kind=kind, result=PENDING)
    snap = snapshot.build(_member(kind), _with_cluster(applied, kind=kind))
    out = to_json(decide(snap, NOW), verbose=True)
    assert (out["op"], out["reason"]) == ("refresh", "RefreshAfterApply")
    assert "not definite" in out["message"]
    refreshed = job("refresh", 1, "succeeded", owner="m1", kind=kind, finished=ago(seconds=5))
    after = decided(_member(kind), _with_cluster(applied, refreshed, kind=kind))
    assert after == {"action": "idle"}  # the refresh carried no pending health reading


def test_no_refresh_after_a_definite_apply_a_cluster_or_no_reading() -> None:
    definite = job("apply", 1, "succeeded", owner="m1", kind=MACHINE, result=DEFINITE)
    assert decided(_member(), _with_cluster(definite)) == {"action": "idle"}
    bare = job("apply", 1, "succeeded", owner="m1", kind=MACHINE, result={"stateSerial": 1})
    assert decided(_member(), _with_cluster(bare)) == {"action": "idle"}
    pending_outputs = {"contract": {"pending": ["x"], "health": "running"}}
    cluster_apply = job("apply", 1, "succeeded", result=pending_outputs)
    assert decided(captf(), [*base_objects(), cluster_apply]) == {"action": "idle"}


@pytest.mark.parametrize(
    ("pending_refreshes", "delay"), [(0, 30), (1, 60), (2, 120), (3, 240), (4, 300), (9, 300)]
)
def test_pending_health_is_refreshed_at_30s_doubling_to_5min(
    pending_refreshes: int, delay: float
) -> None:
    applied = job("apply", 1, "succeeded", finished=ago(minutes=60), result=HEALTH_PENDING)
    refreshes = [
        job("refresh", i + 1, "succeeded", finished=ago(minutes=50 - i), result=HEALTH_PENDING)
        for i in range(pending_refreshes)
    ]
    others = [*base_objects(), applied, *refreshes]
    newest = ago(minutes=50 - pending_refreshes + 1) if refreshes else ago(minutes=60)
    at = newest + _s(delay)
    assert decided(captf(), others, at=at - _s(1)) == {"action": "idle", "after": 1.0}
    out = decided(captf(), others, at=at)
    assert (out["op"], out["reason"]) == ("refresh", "HealthPending")


def test_a_health_reading_that_is_not_pending_ends_the_streak() -> None:
    applied = job("apply", 1, "succeeded", finished=ago(minutes=60), result=HEALTH_PENDING)
    healthy = job("refresh", 1, "succeeded", finished=ago(minutes=50), result=DEFINITE)
    assert decided(captf(), [*base_objects(), applied, healthy]) == {"action": "idle"}


@pytest.mark.parametrize(
    ("result", "reading"),
    [
        ({}, None),
        ({"contract": "x"}, None),
        ({"contract": {"pending": "provider_id"}}, None),
        ({"contract": {"health": 3}}, None),
        ({"contract": {}}, Reading((), None)),
        (DEFINITE, Reading((), "running")),
    ],
)
def test_a_reading_is_read_strictly(result: Json, reading: Reading | None) -> None:
    assert reading_of(job("apply", 1, "succeeded", result=result)) == reading


def test_what_a_reading_counts_as_definite() -> None:
    assert Reading((), "running").definite
    assert Reading((), "degraded").definite
    assert not Reading(("addresses",), "running").definite
    assert not Reading((), "unknown").definite
    assert not Reading((), None).definite
    assert Reading((), None).health_pending
