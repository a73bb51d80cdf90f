"""Remediation through Cluster API (controller/core/decide/remediation.py): after the
threshold's unhealthy readings in a row (three by default), or at once for an instance
read terminated or twice without its provider ID, the plan marks the owner Machine
`cluster.x-k8s.io/remediate-machine`, and withdraws only its own mark when the instance
reads running again; never while paused or deleting, never for a module outside the
contract."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_ACCOUNTED, ANN_PAUSED, FINALIZER, MACHINE
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
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
# Readings the module's state alone does not make: running with `healthy = false`, and
# running without a provider_id output.
SICK = "running, healthy = false"
GONE = "running, provider_id null"
PROVIDER_ID = "captf://c1/m1"


def _reading(health: str | None) -> Json:
    if health == NO_READING:
        return {"stateSerial": 1}
    if health == SICK:
        return {
            "stateSerial": 1,
            "contract": {"pending": [], "health": "running", "healthy": False},
        }
    if health == GONE:
        contract = {"pending": ["provider_id"], "health": "running", "healthy": True}
        return {"stateSerial": 1, "contract": contract}
    healthy = {"healthy": True} if health == "running" else {}
    return {"stateSerial": 1, "contract": {"pending": [], "health": health, **healthy}}


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


@pytest.mark.parametrize(
    ("healths", "marked"),
    [
        (["terminated"], True),  # the apply's own reading
        (["running", "running", "terminated"], True),
        (["running", "terminated", FAILED, NO_READING, "unknown"], True),
        (["stopped", "terminated"], True),
        (["terminated", "running"], False),
        (["running", "stopped"], False),
    ],
)
def test_a_terminated_instance_is_marked_at_once(healths: list[str], marked: bool) -> None:
    """Nothing to wait for: the instance is gone, and one reading cannot be a blip of a
    state the module reports only when the cloud says so (before, three were needed)."""
    patch = _mark(_member(), _with_cluster(*_readings(*healths)))
    assert patch == ({REMEDIATE: "", OURS: "uid-m1"} if marked else None)


@pytest.mark.parametrize(
    ("healths", "marked"),
    [
        ([SICK, SICK, SICK], True),
        (["stopped", SICK, "degraded"], True),
        ([SICK, SICK], False),
        ([SICK, SICK, "running", SICK], False),
    ],
)
def test_running_with_healthy_false_counts_as_unhealthy(healths: list[str], marked: bool) -> None:
    """InstanceUnhealthy is unhealthy: the module says the instance runs but does not
    serve (before, the reading carried the state only and such an instance read well)."""
    patch = _mark(_member(), _with_cluster(*_readings(*healths)))
    assert patch == ({REMEDIATE: "", OURS: "uid-m1"} if marked else None)


def test_running_with_healthy_false_does_not_withdraw_a_mark() -> None:
    ours = {REMEDIATE: "", OURS: "uid-m1"}
    assert _mark(_member(), _with_cluster(*_readings("stopped", SICK)), ours) is None
    recovered = _with_cluster(*_readings("stopped", SICK, "running"))
    assert _mark(_member(), recovered, ours) == {REMEDIATE: None, OURS: None}


def _placed() -> Json:
    """A machine whose spec.providerID was written from its module."""
    return captf(MACHINE, "m1", spec={"providerID": PROVIDER_ID})


@pytest.mark.parametrize(
    ("healths", "marked"),
    [
        (["running", GONE, GONE], True),
        (["running", GONE, FAILED, GONE], True),  # nothing told between them
        (["stopped", "stopped", GONE], False),  # one gone reading counts nowhere
        (["stopped", "stopped", GONE, "stopped"], True),  # ... nor ends the row
        (["running", GONE], False),
        (["running", GONE, "running", GONE], False),
        (["running", GONE, "stopped", GONE], False),
    ],
)
def test_an_instance_without_its_provider_id_on_two_readings_is_marked(
    healths: list[str], marked: bool
) -> None:
    """The module no longer finds the instance spec.providerID names: gone, whatever its
    health output says. One such reading could be a blip of the module's read; two in a
    row mark at once, without the threshold."""
    patch = _mark(_placed(), _with_cluster(*_readings(*healths)))
    assert patch == ({REMEDIATE: "", OURS: "uid-m1"} if marked else None)


def test_no_provider_id_before_one_was_written_is_an_instance_coming_up() -> None:
    assert _mark(_member(), _with_cluster(*_readings(GONE, GONE, GONE))) is None


def _cluster_with(others: list[Json], health: Json) -> list[Json]:
    for obj in others:
        if obj["kind"] == "TerraformCluster":
            obj["spec"]["health"] = health
    return others


@pytest.mark.parametrize(
    ("own", "clusters", "count", "marked"),
    [
        (None, None, 3, True),  # the default, 3
        (None, None, 2, False),
        (1, None, 1, True),
        (5, None, 4, False),
        (5, None, 5, True),
        (None, 1, 1, True),  # the cluster's, inherited
        (None, 5, 4, False),
        (5, 1, 4, False),  # the machine's own wins
        (1, 5, 1, True),
        (None, 0, 2, False),  # a cluster's value out of range: the default
        (None, "2", 2, False),
    ],
)
def test_the_threshold_is_the_machines_else_its_clusters_else_three(
    own: int | None, clusters: object, count: int, marked: bool
) -> None:
    machine = captf(MACHINE, "m1", spec={"health": {"unhealthyThreshold": own}} if own else None)
    others = _with_cluster(*_readings("running", *["stopped"] * count))
    if clusters is not None:
        others = _cluster_with(others, {"unhealthyThreshold": clusters})
    patch = _mark(machine, others)
    assert patch == ({REMEDIATE: "", OURS: "uid-m1"} if marked else None)


@pytest.mark.parametrize("value", [0, 101, -1, "3", True, 2.5])
def test_a_threshold_outside_1_to_100_is_an_invalid_policy(value: object) -> None:
    machine = captf(MACHINE, "m1", spec={"health": {"unhealthyThreshold": value}})
    snap = snapshot.build(machine, _with_cluster(*_readings("stopped")))
    out = to_json(decide(snap, NOW), verbose=True)
    assert out["reason"] == "JobPolicyInvalid"
    assert "spec.health.unhealthyThreshold must be an integer from 1 to 100" in out["message"]


@pytest.mark.parametrize("threshold", [1, 3, 5])
def test_the_row_kept_past_pruning_is_as_long_as_the_threshold(threshold: int) -> None:
    """With a threshold of 5 the row must keep five readings, not three."""
    machine = captf(MACHINE, "m1", spec={"health": {"unhealthyThreshold": threshold}})
    world = [_accounted(r) for r in _readings("running")]
    marks = []
    for seq in range(1, threshold + 2):
        reading = job(
            "refresh",
            seq,
            "succeeded",
            owner="m1",
            kind=MACHINE,
            finished=ago(seconds=5 * (20 - seq)),
            result=_reading("stopped"),
        )
        world.append(_accounted(reading))
        todo = plan_pass(snapshot.build(machine, _with_cluster(*world)), NOW)
        marks.append(todo.owner_mark is not None)
        world = [r for r in world if r["metadata"]["name"] not in todo.prune]
        kept = [r for r in world if r["metadata"]["labels"]["captf.io/op"] == "refresh"]
        assert len(kept) <= threshold
    assert marks == [False] * (threshold - 1) + [True, True]


# -- the row against a model of the rules, for any sequence of readings ---------------

_TOLD = ["running", "pending", "degraded", "stopped", "terminated", SICK, GONE]
_UNTOLD = [FAILED, NO_READING, "unknown", None]


def _model(healths: list[str | None], threshold: int) -> bool:
    """The rules of docs/clusterapi.md read directly: among the readings that tell the
    health, newest first, the newest terminated, or the two newest without a provider
    ID, mark at once; else the unhealthy ones before the first running or pending
    reading (readings without a provider ID pass over) reach the threshold."""
    told = [h for h in reversed(healths) if h not in _UNTOLD]
    if told[:1] == ["terminated"] or told[:2] == [GONE, GONE]:
        return True
    count = 0
    for health in told:
        if health in ("running", "pending"):
            break
        count += health != GONE
    return count >= threshold


@settings(max_examples=150, deadline=None)
@given(
    healths=st.lists(st.sampled_from(_TOLD + _UNTOLD), min_size=1, max_size=8),
    threshold=st.integers(min_value=1, max_value=6),
)
def test_the_mark_follows_the_rules_for_any_readings(
    healths: list[str | None], threshold: int
) -> None:
    # The first reading is the apply's: a failed apply is no reading of this model.
    healths = ["running" if healths[0] == FAILED else healths[0], *healths[1:]]
    machine = captf(
        MACHINE,
        "m1",
        spec={"providerID": PROVIDER_ID, "health": {"unhealthyThreshold": threshold}},
    )
    patch = _mark(machine, _with_cluster(*_readings(*healths)))
    assert (patch is not None) == _model(healths, threshold)
