"""An object as `clusterctl move` leaves it on the target (issue 37, items 2 and 3): a new
uid, no status, no Jobs; its durable inputs Secrets moved with it (they are owned by it),
its state and backups only when they carry the move label.

Item 2: whether it applied is read from what survives the move (the inputs Secrets'
`captf.io/applied`, the backups, the Jobs), for every kind: with its state gone it waits
`StateLost` (a deletion is held), never applies again, which would make its
infrastructure a second time. Item 3: with its state there and no Job to measure from,
every schedule still comes due, at its creation plus its jitter (docs/decisions.md,
"The order"): the health watch, a pool's membership re-read, drift and refresh."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import (
    ANN_APPLIED,
    ANN_SERIAL,
    CLUSTER,
    FINALIZER,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_NAME,
    MACHINE,
    POOL,
    inputs_secret_prefix,
    state_secret_name,
)
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
from controller.core.decide.triggers import HEALTH, MEMBERSHIP, jitter
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    NS,
    ago,
    base_objects,
    captf,
    decided,
    job,
    labelled,
    secret,
    ts,
)
from tests.unit.core.decide.test_schedule import _with_cluster

NAMES = {CLUSTER: "c1", POOL: "m1", MACHINE: "m1"}
KINDS = [CLUSTER, POOL, MACHINE]


def _moved(kind: str, *, created: timedelta = timedelta(minutes=40), **kw: Any) -> Json:
    """The object on the target: no status (unless `kw` gives one), created by the move."""
    obj = captf(kind, NAMES[kind], **kw)
    obj["metadata"]["creationTimestamp"] = ts(NOW - created)
    return obj


def _arrived(kind: str, *, with_state: bool) -> list[Json]:
    """What the target shows beside it: a Ready cluster and the Cluster API objects it acts
    for, its module (a role module for a member), credentials, and its state only when
    `with_state`."""
    if kind == CLUSTER:
        return base_objects(applied=with_state)
    others = _with_cluster(kind=kind)
    if with_state:
        return others
    state = state_secret_name(NS, kind, "m1")
    return [o for o in others if o["metadata"]["name"] != state]


def _inputs(kind: str, applied: bool = True) -> Json:
    """A durable inputs Secret, owned by the object and so moved with it."""
    name = NAMES[kind]
    notes = {ANN_APPLIED: "true"} if applied else {}
    body = secret(f"{inputs_secret_prefix(NS, kind, name)}0123abcd", {"variables.json": "{}"})
    body["metadata"]["annotations"] = notes
    return labelled(body, name, kind)


def _backup(kind: str, serial: int = 3) -> Json:
    name = NAMES[kind]
    out = secret(f"{state_secret_name(NS, kind, name)}-{serial}", {"terraform.tfstate": "{}"})
    out["metadata"]["labels"] = {LABEL_BACKUP_OF: name, LABEL_KIND: kind, LABEL_NAME: name}
    out["metadata"]["annotations"] = {ANN_SERIAL: str(serial)}
    return out


def _left_a_state(kind: str) -> Json:
    return job("apply", 1, "succeeded", owner=NAMES[kind], kind=kind, result={"stateSerial": 2})


EVIDENCE = {
    "inputs Secret marked applied": lambda kind: [_inputs(kind)],
    "a state backup": lambda kind: [_inputs(kind, applied=False), _backup(kind)],
    "a Job that left a state": lambda kind: [_left_a_state(kind)],
}
FIRST_APPLY = {CLUSTER: "InputsChanged", POOL: "InputsChanged", MACHINE: "NoState"}


# --- Item 2: applied before, from durable evidence ---------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("evidence", list(EVIDENCE))
def test_a_moved_object_whose_state_is_gone_waits_state_lost_and_never_applies_again(
    kind: str, evidence: str
) -> None:
    others = [*_arrived(kind, with_state=False), *EVIDENCE[evidence](kind)]
    out = decided(_moved(kind), others)
    assert out == {"action": "requeue", "reason": "StateLost", "after": 60.0}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("evidence", list(EVIDENCE))
def test_its_deletion_is_held_as_before_the_move(kind: str, evidence: str) -> None:
    obj = _moved(kind, deleting=ago(minutes=1), finalizers=[FINALIZER])
    others = [*_arrived(kind, with_state=False), *EVIDENCE[evidence](kind)]
    assert decided(obj, others) == {"action": "requeue", "reason": "DeletionHeld", "after": 60.0}


@pytest.mark.parametrize("kind", KINDS)
def test_status_alone_still_shows_an_apply_and_nothing_shows_none(kind: str) -> None:
    """status.stateSerial stays one of the signals (objects applied before the applied
    mark existed have no other); without any, the object never applied: its first apply."""
    others = [*_arrived(kind, with_state=False), _inputs(kind, applied=False)]
    told = _moved(kind, status={"stateSerial": 4})
    assert decided(told, others)["reason"] == "StateLost"
    out = decided(_moved(kind), others)
    assert (out["action"], out["op"], out["reason"]) == ("run", "apply", FIRST_APPLY[kind])


def test_the_wait_says_what_shows_the_apply() -> None:
    others = [*_arrived(MACHINE, with_state=False), _inputs(MACHINE)]
    out = to_json(decide(snapshot.build(_moved(MACHINE), others), NOW), verbose=True)
    state = state_secret_name(NS, MACHINE, "m1")
    assert out["message"] == (
        f"state Secret {state} is gone, and inputs Secret "
        f"{inputs_secret_prefix(NS, MACHINE, 'm1')}0123abcd is marked {ANN_APPLIED}"
    )


# --- Item 3: the schedules of an object without Jobs --------------------------------------


def test_a_moved_machine_has_its_health_read_again_at_its_creation_and_jitter() -> None:
    late = jitter("uid-m1", HEALTH, 300)
    others = _arrived(MACHINE, with_state=True)
    out = decided(_moved(MACHINE), others)
    assert (out["action"], out["op"], out["reason"]) == ("run", "refresh", "HealthCheckDue")
    just_moved = _moved(MACHINE, created=timedelta(0))
    assert decided(just_moved, others) == {"action": "idle", "after": late}
    assert decided(just_moved, others, at=NOW + timedelta(seconds=late))["reason"] == (
        "HealthCheckDue"
    )


def test_a_moved_pool_re_reads_its_members_at_its_creation_and_jitter() -> None:
    late = jitter("uid-m1", MEMBERSHIP, 60)
    others = _arrived(POOL, with_state=True)
    out = decided(_moved(POOL), others)
    assert (out["action"], out["op"], out["reason"]) == ("run", "refresh", "MembershipRefreshDue")
    just_moved = _moved(POOL, created=timedelta(0))
    assert decided(just_moved, others) == {"action": "idle", "after": late}


@pytest.mark.parametrize("kind", [MACHINE, POOL])
def test_the_re_read_it_runs_anchors_the_schedule_from_then_on(kind: str) -> None:
    refreshed = job(
        "refresh",
        1,
        "succeeded",
        owner="m1",
        kind=kind,
        finished=ago(seconds=10),
        result={"stateSerial": 1, "contract": {"pending": [], "health": "running"}},
    )
    out = decided(_moved(kind), [*_arrived(kind, with_state=True), refreshed])
    assert out["action"] == "idle", out
    assert 0 < out["after"] < 330


@pytest.mark.parametrize("kind", [MACHINE, POOL])
def test_an_object_never_applied_has_no_such_schedule(kind: str) -> None:
    out = decided(_moved(kind), _arrived(kind, with_state=False))
    assert (out["op"], out["reason"]) == ("apply", FIRST_APPLY[kind])


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([MACHINE, POOL]),
    st.integers(0, 7200),
    st.uuids(),
)
def test_without_a_job_each_schedule_is_due_at_creation_plus_jitter(
    kind: str, age: int, uid: object
) -> None:
    """Due at max(now, creation + jitter): never before the object's jitter has passed,
    at once for an object older than that."""
    obj = _moved(kind, created=timedelta(seconds=age))
    obj["metadata"]["uid"] = str(uid)
    schedule, interval = (HEALTH, 300) if kind == MACHINE else (MEMBERSHIP, 60)
    late = jitter(str(uid), schedule, interval)
    out = decided(obj, _arrived(kind, with_state=True))
    if age >= late:
        assert (out["action"], out["op"]) == ("run", "refresh"), out
    else:
        assert out == {"action": "idle", "after": round(late - age, 3)}
