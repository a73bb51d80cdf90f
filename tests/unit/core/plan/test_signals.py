"""InputsApplied, StateReadable, EndpointAvailable, and the transition Events: each told
once, under a name a replayed pass computes again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.core.basics.names import CLUSTER
from controller.core.decide import snapshot
from controller.core.decide.decision import Idle, Requeue, Run
from controller.core.plan import signals
from controller.core.plan.planner import Plan, plan_pass
from runtime.jsonobj import Json
from tests import capi_builders as capi
from tests.builders import NOW, ROLE_MODULE, base_objects, captf, module_configmap, secret
from tests.unit.core.plan.test_contract_writeback import (
    CLUSTER_OUT,
    MACHINE_OUT,
    _applied,
    conditions,
    machine_plan,
)

PAUSED = {"cluster.x-k8s.io/paused": ""}


def reasons(todo: Plan) -> dict[str, str]:
    return {e.reason: e.name for e in todo.events}


def cluster_snap(**cluster: Any) -> Any:
    owner = capi.cluster(**cluster)
    tc = capi.owned(CLUSTER, "c1", owner=owner)
    others = [module_configmap("c1", ROLE_MODULE), secret("creds", {"token": "t"})]
    return _applied(capi.snap_of(tc, others, [owner]), CLUSTER_OUT, "c1")


def with_meta(snap: Any, *, annotations: Json | None = None, status: Json | None = None) -> Any:
    obj = dict(snap.obj)
    if annotations is not None:
        meta = obj["metadata"]
        obj["metadata"] = meta | {"annotations": (meta.get("annotations") or {}) | annotations}
    if status is not None:
        obj["status"] = status
    return replace(snap, obj=obj)


def test_an_applied_machine_shows_its_inputs_and_state_and_tells_its_provider_id() -> None:
    todo = machine_plan(MACHINE_OUT)
    found = conditions(todo)
    assert (found["InputsApplied"]["status"], found["InputsApplied"]["reason"]) == (
        "True",
        "InputsApplied",
    )
    assert found["StateReadable"]["status"] == "True"
    assert "3" in found["StateReadable"]["message"]
    assert "EndpointAvailable" not in found  # a machine has no endpoint
    told = reasons(todo)
    assert "ProviderIDSet" in told
    # The same pass again (a replay before the status write) names the same Event.
    assert reasons(machine_plan(MACHINE_OUT))["ProviderIDSet"] == told["ProviderIDSet"]


def test_a_written_provider_id_is_not_told_again() -> None:
    todo = machine_plan(MACHINE_OUT, spec={"providerID": "captf://cl/m1"})
    assert "ProviderIDSet" not in reasons(todo)


def test_a_cluster_tells_its_endpoint_once_and_shows_it_available() -> None:
    todo = plan_pass(cluster_snap(), NOW)
    assert conditions(todo)["EndpointAvailable"]["status"] == "True"
    assert "127.0.0.1:6443" in conditions(todo)["EndpointAvailable"]["message"]
    assert "EndpointSet" in reasons(todo)
    given = plan_pass(cluster_snap(endpoint={"host": "10.1.1.1", "port": 443}), NOW)
    assert "EndpointSet" not in reasons(given)
    assert conditions(given)["EndpointAvailable"]["status"] == "True"


def test_nothing_applied_yet() -> None:
    objects = [o for o in base_objects() if not o["metadata"]["name"].endswith("-state")]
    todo = plan_pass(snapshot.build(captf(), objects), NOW)
    found = conditions(todo)
    assert (found["InputsApplied"]["status"], found["InputsApplied"]["reason"]) == (
        "False",
        "NotApplied",
    )
    assert "StateReadable" not in found
    assert "EndpointAvailable" not in found  # no contract


def test_pause_and_resume_are_told_once_each() -> None:
    snap = cluster_snap(endpoint={"host": "10.1.1.1", "port": 443})
    paused = plan_pass(with_meta(snap, annotations=PAUSED), NOW)
    assert "Paused" in reasons(paused)
    assert paused.status is not None
    stored = paused.status["conditions"]
    # Still paused, the status written: nothing more to tell.
    again = plan_pass(with_meta(snap, annotations=PAUSED, status={"conditions": stored}), NOW)
    assert "Paused" not in reasons(again)
    resumed = plan_pass(with_meta(snap, status={"conditions": stored}), NOW)
    assert "Resumed" in reasons(resumed)
    assert reasons(resumed)["Resumed"] != reasons(paused)["Paused"]


@pytest.mark.parametrize(
    ("decision", "serial", "want"),
    [
        (Requeue("StateUnreadable", 60, message="serial missing"), 3, ("False", "StateUnreadable")),
        (Requeue("StateLost", 60), None, ("False", "StateLost")),
        (Requeue("DeletionHeld", 60), None, ("False", "DeletionHeld")),
        (Idle(after=None), 7, ("True", "StateReadable")),
        (Idle(after=None), None, None),
    ],
)
def test_state_readable(decision: Any, serial: int | None, want: tuple[str, str] | None) -> None:
    found = signals.state_readable(decision, serial)
    assert (None if found is None else (found["status"], found["reason"])) == want


def _snap() -> Any:
    return snapshot.build(captf(), base_objects())


def image(digest: str) -> Json:
    return {"image": {"reference": "r.example/m:1", "digest": digest}}


@pytest.mark.parametrize(
    ("stored", "desired", "told"),
    [
        ({}, image("sha256:aa"), True),
        (image("sha256:aa"), image("sha256:aa"), False),
        (image("sha256:aa"), image("sha256:bb"), True),
        (image("sha256:aa"), {}, False),
    ],
)
def test_a_digest_is_told_when_it_changes(stored: Json, desired: Json, told: bool) -> None:
    found = signals.events(_snap(), Idle(after=None), stored, desired, None)
    assert [e.reason for e in found] == (["DigestPinned"] if told else [])


def waiting(reason: str, at: str = "2026-01-01T00:00:00Z") -> Json:
    cond = {"type": "Waiting", "status": "True", "reason": reason, "lastTransitionTime": at}
    return {"conditions": [cond | {"message": f"waits: {reason}"}]}


def test_the_plan_lifecycle() -> None:
    snap = _snap()
    waits = signals.events(
        snap, Idle(after=None), waiting("JobRunning"), waiting("WaitingForApproval"), None
    )
    assert [e.reason for e in waits] == ["PlanAwaitsApproval"]
    still = signals.events(
        snap, Idle(after=None), waiting("WaitingForApproval"), waiting("WaitingForApproval"), None
    )
    assert still == ()
    approved = Run("apply", "InputsChanged", 1, plan_job="c1-plan-abc")
    applying = signals.events(snap, approved, waiting("WaitingForApproval"), {}, None)
    assert [e.reason for e in applying] == ["ApprovedPlanApplying"]
    assert applying == signals.events(snap, approved, waiting("WaitingForApproval"), {}, None)


def test_event_names_fit_and_differ_by_object() -> None:
    snap = _snap()
    long = replace(snap, obj=snap.obj | {"metadata": snap.obj["metadata"] | {"name": "x" * 253}})
    [mine] = signals.events(snap, Idle(after=None), {}, image("sha256:aa"), None)
    [theirs] = signals.events(long, Idle(after=None), {}, image("sha256:aa"), None)
    assert len(theirs.name) <= 253
    assert mine.name != theirs.name
