"""The schedule's rules: the jitter of drift and refresh, the refresh after a member's
apply whose contract reading was not definite, and refreshes while health is pending."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.names import MACHINE, POOL
from controller.core.basics.timefmt import format_time
from controller.core.decide import snapshot
from controller.core.decide.context import Context, context_of
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
from controller.core.decide.triggers import HEALTH, jitter
from controller.core.jobs.readings import Reading, reading_of
from runtime.jsonobj import Json
from tests.builders import (
    MODULE,
    NOW,
    ROLE_MODULE,
    ago,
    base_objects,
    captf,
    decided,
    job,
    module_configmap,
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


def _speaking(obj: Json, others: list[Json], *, module: dict[str, str] = ROLE_MODULE) -> list[Json]:
    """`others` with the object's module ConfigMap holding `module` (by default a role
    module: it declares captf_contract) and its state recording the inputs hash the object
    renders now, so no apply is due and the schedule's rules decide."""
    name, kind = obj["metadata"]["name"], obj["kind"]
    replaced = {f"{name}-module", state(name, kind=kind)["metadata"]["name"]}
    kept = [o for o in others if o["metadata"]["name"] not in replaced]
    with_module = [*kept, module_configmap(name, module)]
    ctx = context_of(snapshot.build(obj, with_module), NOW)
    assert isinstance(ctx, Context)
    return [*with_module, state(name, inputs=ctx.inputs.hash, kind=kind)]


def _with_cluster(
    *objects: Json, kind: str = MACHINE, module: dict[str, str] = ROLE_MODULE
) -> list[Json]:
    """The member's module, credentials and state, its TerraformCluster, and the Cluster API
    objects it acts for (its owner, their Cluster, the bootstrap data)."""
    bare = base_objects("m1", applied=False)[1:]  # the state: _speaking's, of its kind
    others = [*bare, captf(ready=True), *owners_of(_member(kind)), *objects]
    return _speaking(_member(kind), others, module=module)


def _refresh(seq: int, outcome: str, seconds_ago: float, **kw: Any) -> Json:
    return job(
        "refresh", seq, outcome, owner="m1", kind=MACHINE, finished=ago(seconds=seconds_ago), **kw
    )


@pytest.mark.parametrize("kind", [MACHINE, POOL])
def test_a_refresh_follows_a_members_apply_whose_outputs_were_not_definite(kind: str) -> None:
    applied = job("apply", 1, "succeeded", owner="m1", kind=kind, result=PENDING)
    snap = snapshot.build(_member(kind), _with_cluster(applied, kind=kind))
    out = to_json(decide(snap, NOW), verbose=True)
    assert (out["op"], out["reason"]) == ("refresh", "RefreshAfterApply")
    assert "not definite" in out["message"]
    refreshed = job("refresh", 1, "succeeded", owner="m1", kind=kind, finished=ago(seconds=5))
    after = decided(_member(kind), _with_cluster(applied, refreshed, kind=kind))
    # The refresh carried no pending health reading: only a pool's membership re-read is
    # scheduled, 60 s after that refresh (plus its jitter), and a machine's health watch,
    # 5 min after it (plus its jitter): it carried no reading either, so nothing else will.
    assert after["action"] == "idle"
    if kind == POOL:
        assert 55 <= after["after"] <= 61
    else:
        assert after["after"] == 295 + jitter("uid-m1", HEALTH, 300)


def _backoff(after: float) -> Json:
    return {
        "action": "requeue",
        "op": "refresh",
        "reason": "RefreshAfterApplyBackoff",
        "after": after,
    }


def _runs(retry: int) -> Json:
    return {"action": "run", "op": "refresh", "reason": "RefreshAfterApply", "retry": retry}


# Issue 26, item 1: a failed refresh kept nothing due, and the machine was never read again.
@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        # Newest last, a minute apart, the newest 30 s ago: the seed's delay from it.
        (["failed"], _backoff(30.0)),
        (["failed", "failed"], _backoff(90.0)),
        (["failed", "failed", "failed"], _backoff(570.0)),
        # An interruption (a drain) counts nowhere: due again at once ...
        (["interrupted"], _runs(1)),
        # ... and does not end the count: the failure's minute has passed, retry 2.
        (["failed", "interrupted"], _runs(2)),
        # Done; the health watch's next reading 5 min after the refresh, plus its jitter.
        (["failed", "succeeded"], {"action": "idle", "after": 270 + jitter("uid-m1", HEALTH, 300)}),
    ],
)
def test_a_refresh_after_apply_that_did_not_succeed_stays_due_with_its_backoff(
    outcomes: list[str], expected: Json
) -> None:
    applied = job(
        "apply", 1, "succeeded", owner="m1", kind=MACHINE, finished=ago(minutes=30), result=PENDING
    )
    n = len(outcomes)
    refreshes = [_refresh(i + 1, o, 30 + 60 * (n - 1 - i)) for i, o in enumerate(outcomes)]
    assert decided(_member(), _with_cluster(applied, *refreshes)) == expected


def test_a_failed_refresh_after_apply_is_retried_once_its_delay_has_passed() -> None:
    applied = job(
        "apply", 1, "succeeded", owner="m1", kind=MACHINE, finished=ago(minutes=30), result=PENDING
    )
    failed = _refresh(1, "failed", 60)
    assert decided(_member(), _with_cluster(applied, failed)) == {
        "action": "run",
        "op": "refresh",
        "reason": "RefreshAfterApply",
        "retry": 2,
    }


@given(st.lists(st.sampled_from(["failed", "interrupted", "succeeded"]), max_size=6))
def test_the_refresh_after_apply_is_due_until_a_refresh_succeeds(outcomes: list[str]) -> None:
    applied = job(
        "apply", 1, "succeeded", owner="m1", kind=MACHINE, finished=ago(minutes=90), result=PENDING
    )
    refreshes = [_refresh(i + 1, o, 600 * (len(outcomes) - i)) for i, o in enumerate(outcomes)]
    out = decided(_member(), _with_cluster(applied, *refreshes), at=NOW + _s(3600))
    if "succeeded" in outcomes:
        assert out.get("reason") != "RefreshAfterApply"  # the health watch's, if any
    else:
        assert (out["op"], out["reason"]) == ("refresh", "RefreshAfterApply")


# Issue 26, item 1: an apply and a refresh finishing in the same second are ordered by
# creation time, as everywhere in the history.
@pytest.mark.parametrize(
    ("refresh_created", "due"),
    [
        (-40, True),  # the refresh was created before the apply: it read the state before it
        (+5, False),  # created after the apply: it read what the apply left
        (0, True),  # created in the apply's second too: no order can be told, refresh again
    ],
)
def test_an_apply_and_a_refresh_in_the_same_second(refresh_created: float, due: bool) -> None:
    second = ago(minutes=5)
    apply_created = second - _s(30)
    applied = job(
        "apply",
        1,
        "succeeded",
        owner="m1",
        kind=MACHINE,
        finished=second,
        created=apply_created,
        result=PENDING,
    )
    refreshed = job(
        "refresh",
        1,
        "succeeded",
        owner="m1",
        kind=MACHINE,
        finished=second,
        created=apply_created + _s(refresh_created),
    )
    out = decided(_member(), _with_cluster(applied, refreshed))
    assert (out.get("reason") == "RefreshAfterApply") is due, out


def test_no_refresh_after_a_definite_apply_a_cluster_or_no_reading() -> None:
    definite = job("apply", 1, "succeeded", owner="m1", kind=MACHINE, result=DEFINITE)
    # Only the health watch is scheduled (5 min after the apply, plus the jitter).
    out = decided(_member(), _with_cluster(definite))
    assert out["action"] == "idle"
    assert 0 < out["after"] <= 330
    # No reading at all: no refresh after the apply; the health watch reads it in 5 min.
    bare = job("apply", 1, "succeeded", owner="m1", kind=MACHINE, result={"stateSerial": 1})
    out = decided(_member(), _with_cluster(bare))
    assert out["action"] == "idle"
    assert 0 < out["after"] <= 330
    pending_outputs = {"contract": {"pending": ["x"], "health": "running"}}
    cluster_apply = job("apply", 1, "succeeded", result=pending_outputs)
    assert decided(captf(), _speaking(captf(), [*base_objects(), cluster_apply])) == {
        "action": "idle"
    }


# Issue 26, item 8: a module outside the contract reads all-pending for ever (the runner
# reads the role's outputs of any state); it is owed its schedule, not endless refreshes.
OUTSIDE = {
    "stateSerial": 1,
    "contract": {"pending": ["provider_id", "addresses", "health"], "health": None},
}


@pytest.mark.parametrize("kind", [MACHINE, POOL])
def test_a_module_outside_the_contract_is_not_refreshed_for_its_readings(kind: str) -> None:
    applied = job(
        "apply", 1, "succeeded", owner="m1", kind=kind, finished=ago(minutes=60), result=OUTSIDE
    )
    refreshed = job(
        "refresh", 1, "succeeded", owner="m1", kind=kind, finished=ago(minutes=30), result=OUTSIDE
    )
    for jobs in ([applied], [applied, refreshed]):
        outside = _with_cluster(*jobs, kind=kind, module=MODULE)
        assert decided(_member(kind), outside) == {"action": "idle"}
        # The same readings from a role module are waited on.
        role = decided(_member(kind), _with_cluster(*jobs, kind=kind))
        assert role["op"] == "refresh"
        assert role["reason"] in ("RefreshAfterApply", "HealthPending")


def test_a_module_outside_the_contract_keeps_the_refresh_interval_it_asked_for() -> None:
    obj = captf(spec={"refresh": {"interval": "1h"}})
    applied = job("apply", 1, "succeeded", finished=ago(minutes=61), result=OUTSIDE)
    others = _speaking(obj, [*base_objects(), applied], module=MODULE)
    late = jitter("uid-c1", "refresh", 3600)
    assert decided(obj, others, at=NOW + _s(late))["reason"] == "RefreshDue"
    refreshed = job("refresh", 1, "succeeded", finished=ago(minutes=1), result=OUTSIDE)
    after = decided(obj, _speaking(obj, [*base_objects(), applied, refreshed], module=MODULE))
    assert after == {"action": "idle", "after": 3540.0 + late}


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
    others = _speaking(captf(), [*base_objects(), applied, *refreshes])
    newest = ago(minutes=50 - pending_refreshes + 1) if refreshes else ago(minutes=60)
    at = newest + _s(delay)
    assert decided(captf(), others, at=at - _s(1)) == {"action": "idle", "after": 1.0}
    out = decided(captf(), others, at=at)
    assert (out["op"], out["reason"]) == ("refresh", "HealthPending")


# Issue 26, item 4: the doubling is per apply. A successful apply starts the streak again:
# the instance it made or changed is read 30 s after it, whatever the readings before.
def test_a_successful_apply_restarts_the_pending_health_doubling() -> None:
    first = job("apply", 1, "succeeded", finished=ago(minutes=120), result=HEALTH_PENDING)
    refreshes = [
        job("refresh", i + 1, "succeeded", finished=ago(minutes=110 - i), result=HEALTH_PENDING)
        for i in range(6)
    ]
    second = job("apply", 2, "succeeded", finished=ago(minutes=10), result=HEALTH_PENDING)
    others = _speaking(captf(), [*base_objects(), first, *refreshes, second])
    at = ago(minutes=10) + _s(30)
    assert decided(captf(), others, at=at - _s(1)) == {"action": "idle", "after": 1.0}
    assert decided(captf(), others, at=at)["reason"] == "HealthPending"


def test_a_health_reading_that_is_not_pending_ends_the_streak() -> None:
    applied = job("apply", 1, "succeeded", finished=ago(minutes=60), result=HEALTH_PENDING)
    healthy = job("refresh", 1, "succeeded", finished=ago(minutes=50), result=DEFINITE)
    assert decided(captf(), _speaking(captf(), [*base_objects(), applied, healthy])) == {
        "action": "idle"
    }


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
