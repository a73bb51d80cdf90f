"""Remediation through Cluster API (controller/core/decide/remediation.py): after three
unhealthy readings in a row the plan marks the owner Machine
`cluster.x-k8s.io/remediate-machine`, and withdraws only its own mark when the instance
reads running again; never while paused or deleting, never for a module outside the
contract."""

from __future__ import annotations

import pytest

from controller.core.basics.names import ANN_ACCOUNTED, ANN_PAUSED, FINALIZER, MACHINE
from controller.core.decide import snapshot
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests.builders import (
    MODULE,
    NOW,
    ago,
    captf,
    job,
)
from tests.unit.core.decide.test_schedule import _member, _with_cluster

REMEDIATE = "cluster.x-k8s.io/remediate-machine"
OURS = "captf.io/remediation-requested"


# Readings that tell nothing of the instance: a refresh that failed, one whose result
# carries no contract reading, and the health output null or `unknown`.
FAILED = "failed refresh"
NO_READING = "no reading"


def _reading(health: str | None) -> Json:
    if health == NO_READING:
        return {"stateSerial": 1}
    return {"stateSerial": 1, "contract": {"pending": [], "health": health}}


def _readings(*healths: str | None) -> list[Json]:
    """Oldest first: an apply, then refreshes a minute apart."""
    n = len(healths)
    out = [
        job(
            "apply",
            1,
            "succeeded",
            owner="m1",
            kind=MACHINE,
            finished=ago(n + 1),
            result=_reading(healths[0]),
        )
    ]
    for i, health in enumerate(healths[1:], start=1):
        failed = health == FAILED
        out.append(
            job(
                "refresh",
                i,
                "failed" if failed else "succeeded",
                owner="m1",
                kind=MACHINE,
                finished=ago(n - i + 1),
                result=None if failed else _reading(health),
            )
        )
    return out


def _mark(machine: Json, others: list[Json], notes: dict[str, str] | None = None) -> Json | None:
    if notes is not None:
        for obj in others:
            if obj.get("kind") == "Machine":
                obj["metadata"]["annotations"] = dict(notes)
    todo = plan_pass(snapshot.build(machine, others), NOW)
    return None if todo.owner_mark is None else todo.owner_mark.patch["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("healths", "marked"),
    [
        (["stopped", "stopped", "stopped"], True),
        (["running", "degraded", "terminated", "stopped"], True),
        (["stopped", "stopped"], False),
        (["stopped", "stopped", "running", "stopped"], False),
        (["running", "running"], False),
    ],
)
def test_three_unhealthy_readings_in_a_row_mark_the_machine(
    healths: list[str], marked: bool
) -> None:
    patch = _mark(_member(), _with_cluster(*_readings(*healths)))
    if marked:
        assert patch == {REMEDIATE: "", OURS: "uid-m1"}
    else:
        assert patch is None


@pytest.mark.parametrize(
    "healths",
    [
        ["stopped", "stopped", FAILED, "stopped"],
        ["stopped", "stopped", NO_READING, "stopped"],
        ["stopped", None, "stopped", "stopped"],
        ["stopped", "unknown", "stopped", "stopped"],
        ["stopped", "stopped", "stopped", FAILED],
        ["stopped", "stopped", "stopped", "unknown", FAILED, NO_READING],
    ],
)
def test_a_reading_that_tells_nothing_neither_counts_nor_breaks_the_streak(
    healths: list[str | None],
) -> None:
    """A failed refresh, a result without a contract reading, a null or `unknown` health:
    nobody could tell how the instance is, so the unhealthy readings around it still run
    in a row (before, such a reading started the count again, or blocked the mark)."""
    patch = _mark(_member(), _with_cluster(*_readings(*healths)))
    assert patch == {REMEDIATE: "", OURS: "uid-m1"}


@pytest.mark.parametrize(
    "healths",
    [
        ["stopped", FAILED, NO_READING, "unknown", None],
        ["stopped", "stopped", FAILED, FAILED, FAILED],
        ["stopped", "stopped", "pending", "stopped", "stopped"],
    ],
)
def test_only_readings_of_an_unhealthy_instance_count(healths: list[str | None]) -> None:
    """Three tellings of nothing are not three unhealthy readings; a pending one (the
    instance coming up) starts the count again."""
    assert _mark(_member(), _with_cluster(*_readings(*healths))) is None


def test_a_marked_machine_is_not_marked_again_and_its_mark_withdrawn_when_running() -> None:
    unhealthy = _with_cluster(*_readings("stopped", "stopped", "stopped"))
    assert _mark(_member(), unhealthy, {REMEDIATE: "", OURS: "uid-m1"}) is None
    recovered = _with_cluster(*_readings("stopped", "stopped", "stopped", "running"))
    assert _mark(_member(), recovered, {REMEDIATE: "", OURS: "uid-m1"}) == {
        REMEDIATE: None,
        OURS: None,
    }
    # Running, then a reading of nothing: the newest telling reading is running.
    told = _with_cluster(*_readings("stopped", "stopped", "stopped", "running", FAILED, None))
    assert _mark(_member(), told, {REMEDIATE: "", OURS: "uid-m1"}) == {
        REMEDIATE: None,
        OURS: None,
    }


def test_someone_elses_mark_is_left_alone() -> None:
    recovered = _with_cluster(*_readings("running"))
    assert _mark(_member(), recovered, {REMEDIATE: ""}) is None
    assert _mark(_member(), recovered, {REMEDIATE: "", OURS: "another-uid"}) is None


def test_no_mark_while_paused_deleting_or_outside_the_contract() -> None:
    unhealthy = _readings("stopped", "stopped", "stopped")
    paused = captf(MACHINE, "m1", annotations={ANN_PAUSED: ""})
    assert _mark(paused, _with_cluster(*unhealthy)) is None
    deleting = captf(MACHINE, "m1", deleting=ago(1), finalizers=[FINALIZER])
    assert _mark(deleting, _with_cluster(*unhealthy)) is None
    assert _mark(_member(), _with_cluster(*unhealthy, module=MODULE)) is None


def test_the_mark_is_announced_once_per_reading() -> None:
    others = _with_cluster(*_readings("stopped", "stopped", "stopped"))
    todo = plan_pass(snapshot.build(_member(), others), NOW)
    [event] = [e for e in todo.events if e.reason == "RemediationRequested"]
    assert event.type == "Warning"
    assert "3 readings in a row" in event.message
    again = plan_pass(snapshot.build(_member(), others), NOW)
    assert [e.name for e in again.events if e.reason == "RemediationRequested"] == [event.name]


def _accounted(record: Json) -> Json:
    record["metadata"]["annotations"][ANN_ACCOUNTED] = "true"
    return record


def test_the_row_survives_pruning_pass_by_pass() -> None:
    """successfulJobsHistoryLimit 1 (the default) prunes all but the newest successful
    refresh: the readings of an unhealthy row stay until the row reaches the mark, or
    the count could never pass two (found end to end: a machine read stopped for ever,
    never marked). Each pass sees the world the previous pass's pruning left."""
    world = [_accounted(r) for r in _readings("running")]
    marks = []
    for seq, health in enumerate(["stopped"] * 4 + ["running", "stopped"], start=1):
        world.append(
            _accounted(
                job(
                    "refresh",
                    seq,
                    "succeeded",
                    owner="m1",
                    kind=MACHINE,
                    finished=ago(seconds=10 * (10 - seq)),
                    result=_reading(health),
                )
            )
        )
        todo = plan_pass(snapshot.build(_member(), _with_cluster(*world)), NOW)
        marks.append(None if todo.owner_mark is None else todo.owner_mark.reason)
        world = [r for r in world if r["metadata"]["name"] not in todo.prune]
        kept = [r for r in world if r["metadata"]["labels"]["captf.io/op"] == "refresh"]
        assert len(kept) <= 3  # the row, at most the readings the mark needs
    # Marked at the third (the Machine's annotations are not fed back here, so the mark
    # is asked again at the fourth); withdrawn at running; a new row starts at one.
    assert marks == [None, None, "RemediationRequested", "RemediationRequested", None, None]
