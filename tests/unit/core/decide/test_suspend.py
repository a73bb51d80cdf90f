"""spec.suspend holds every new Job and says which; deletionPolicy Retain (Orphan's new
name) lets the object go without a destroy."""

from __future__ import annotations

import pytest

from controller.core.basics.names import FINALIZER
from controller.core.decide import snapshot
from controller.core.decide.decision import Idle, Requeue, Run
from controller.core.decide.steps import decide
from controller.core.spec.policy import PolicyError, read_policy
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    base_objects,
    captf,
    decided,
    job,
)


def _obj(spec: Json, **kwargs: object) -> Json:
    return captf(spec=spec, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("others", "op", "trigger"),
    [
        (base_objects(applied=False), "apply", "InputsChanged"),
        (
            [*base_objects(), job("drift", 1, "succeeded", finished=ago(minutes=120))],
            "drift",
            "DriftCheckDue",
        ),
    ],
)
def test_a_suspended_object_names_what_would_run(others: list[Json], op: str, trigger: str) -> None:
    spec: Json = {"suspend": True, "drift": {"interval": "1h"}}
    out = decided(_obj(spec), others)
    assert out == {"action": "requeue", "op": op, "reason": "Suspended", "after": 600.0}
    assert decide(snapshot.build(_obj(spec), others), NOW) == Requeue(
        "Suspended", 600.0, op=op, message=f"spec.suspend is true; {op} ({trigger}) would run next"
    )
    resumed = decide(snapshot.build(_obj({**spec, "suspend": False}), others), NOW)
    assert isinstance(resumed, Run)
    assert (resumed.op, resumed.reason) == (op, trigger)


def test_suspend_leaves_a_running_job_and_waits_alone() -> None:
    running = job("apply", 1, None, state="Running")
    out = decided(_obj({"suspend": True}), [*base_objects(applied=False), running])
    assert out["reason"] == "JobRunning"
    backoff = [*base_objects(applied=False), job("apply", 1, "failed", finished=ago(seconds=10))]
    assert decided(_obj({"suspend": True}), backoff)["reason"] == "InputsChangedBackoff"


def test_a_suspended_object_being_deleted_does_not_destroy() -> None:
    obj = captf(spec={"suspend": True}, deleting=ago(minutes=1), finalizers=[FINALIZER])
    out = decided(obj, base_objects())
    assert (out["op"], out["reason"]) == ("destroy", "Suspended")


@pytest.mark.parametrize("suspend", [False, True])
def test_retain_lets_go_without_a_destroy(suspend: bool) -> None:
    obj = captf(
        spec={"deletionPolicy": "Retain", "suspend": suspend},
        deleting=ago(minutes=1),
        finalizers=[FINALIZER],
    )
    decision = decide(snapshot.build(obj, base_objects()), NOW)
    assert isinstance(decision, Idle)
    assert decision.reason == "Retained"
    delete = captf(
        spec={"deletionPolicy": "Delete"}, deleting=ago(minutes=1), finalizers=[FINALIZER]
    )
    assert decided(delete, base_objects())["op"] == "destroy"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"suspend": "yes"}, "spec.suspend must be true or false"),
        ({"deletionPolicy": "Keep"}, "spec.deletionPolicy must be Delete or Retain"),
        ({"deletionPolicy": "Orphan"}, "Orphan is no longer accepted: write Retain"),
    ],
)
def test_bad_values_are_a_policy_error(spec: Json, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        read_policy({"jobs": {"image": "i"}, **spec})
