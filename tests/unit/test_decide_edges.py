"""DecideOp on snapshots built from the spec's words where the first version read them
differently: each case failed before its fix in controller/core."""

from __future__ import annotations

from typing import Any

from controller.core import snapshot
from controller.core.backoff import delay
from controller.core.decide import decide
from controller.core.decision import to_json
from controller.core.names import ANN_ACCOUNTED, ANN_RESTORE_SERIAL
from tests.builders import NOW, ago, base_objects, captf, current_hash, job, secret, ts

Json = dict[str, Any]
MANUAL = {"approval": {"mode": "Manual"}}


def _decide(obj: Json, others: list[Json]) -> Json:
    return to_json(decide(snapshot.build(obj, others), NOW))


def test_delay_with_a_huge_limit_is_the_cap_not_an_overflow() -> None:
    assert delay(5000, 1_000_000) == 600.0
    assert delay(1100, 2000) == 600.0


def test_a_job_in_another_namespace_is_not_the_objects() -> None:
    foreign = job("apply", 1, "failed", finished=ago(seconds=30))
    foreign["metadata"]["namespace"] = "elsewhere"
    del foreign["metadata"]["labels"]["captf.io/uid"]  # matched by name label only
    obj = captf(spec={"variables": {"size": 4}})
    assert _decide(obj, [*base_objects(), foreign]) == {
        "action": "run",
        "op": "apply",
        "reason": "InputsChanged",
        "retry": 1,
    }


def test_manual_plan_followed_by_an_apply_is_used_without_a_plan_job_annotation() -> None:
    # The spec's words: "the newest plan succeeded and no apply has used it". An apply
    # created after the plan finished used it, whether or not it names the plan.
    plan = job("plan", 1, "succeeded", result={"planSecret": "c1-plan-1"}, finished=ago(30))
    apply = job("apply", 1, "succeeded", finished=ago(20), created=ago(25))
    obj = captf(spec=MANUAL)
    others = [*base_objects(), secret("c1-plan-1", {"tfplan": "x"}), plan, apply]
    assert _decide(obj, others) == {"action": "idle"}


def test_manual_plan_without_a_later_apply_still_waits() -> None:
    plan = job("plan", 1, "succeeded", result={"planSecret": "c1-plan-1"}, finished=ago(30))
    apply = job("apply", 1, "succeeded", finished=ago(40), created=ago(45))
    obj = captf(spec=MANUAL | {"variables": {"size": 4}})
    others = [*base_objects(), secret("c1-plan-1", {"tfplan": "x"}), plan, apply]
    assert _decide(obj, others) == {
        "action": "requeue",
        "reason": "WaitingForApproval",
        "after": 600.0,
    }


def test_drift_is_due_when_the_state_shows_an_apply_but_no_job_is_left() -> None:
    obj = captf(spec={"drift": {"interval": "1h"}})
    assert _decide(obj, base_objects()) == {
        "action": "run",
        "op": "drift",
        "reason": "DriftCheckDue",
        "retry": 1,
    }


def test_restore_set_again_after_the_status_cleared_runs_again() -> None:
    # The documented retry: remove the annotation, wait for lastRestoredSerial to clear,
    # set the same serial again. The old, accounted restore Job does not block it.
    old = job(
        "restore",
        1,
        "failed",
        finished=ago(30),
        annotations={ANN_RESTORE_SERIAL: "4", ANN_ACCOUNTED: "true"},
    )
    obj = captf(annotations={ANN_RESTORE_SERIAL: "4"})
    assert _decide(obj, [*base_objects(), old]) == {
        "action": "run",
        "op": "restore",
        "reason": "RestoreRequested",
        "retry": 1,
    }


def test_restore_not_yet_accounted_blocks_a_second_attempt() -> None:
    fresh = job("restore", 1, "failed", finished=ago(1), annotations={ANN_RESTORE_SERIAL: "4"})
    obj = captf(annotations={ANN_RESTORE_SERIAL: "4"})
    assert _decide(obj, [*base_objects(), fresh]) == {"action": "idle"}


def test_a_null_limit_takes_the_default() -> None:
    obj = captf(spec={"variables": {"size": 4}, "jobs": {"failedJobsHistoryLimit": None}})
    obj["spec"]["jobs"]["failedJobsHistoryLimit"] = None
    failures = [
        job("apply", 1, "failed", finished=ago(5)),
        job("apply", 2, "failed", finished=ago(seconds=90)),
    ]
    # Default limit 3: two failures wait 2m from the newest, 30 s left.
    assert _decide(obj, [*base_objects(), *failures]) == {
        "action": "requeue",
        "op": "apply",
        "reason": "InputsChangedBackoff",
        "after": 30.0,
    }


def test_plan_changed_read_from_the_runner_env_ends_on_new_inputs() -> None:
    changed = job("apply", 1, "plan-changed", finished=ago(5))
    old_hash = current_hash(variables={"size": 4})
    env = [{"name": "CAPTF_INPUTS_HASH", "value": old_hash}]
    changed["spec"] = {"template": {"spec": {"containers": [{"name": "runner", "env": env}]}}}
    waiting = _decide(captf(spec={"variables": {"size": 4}}), [*base_objects(), changed])
    assert waiting["reason"] == "WaitingForApproval"
    moved_on = _decide(captf(spec={"variables": {"size": 5}}), [*base_objects(), changed])
    assert moved_on == {"action": "run", "op": "apply", "reason": "InputsChanged", "retry": 1}


def test_times_with_offsets_are_read_as_instants() -> None:
    failed = job("apply", 1, "failed", finished=ago(seconds=30))
    # The same instant as +02:00: 11:59:30Z == 13:59:30+02:00.
    for cond in failed["status"]["conditions"]:
        cond["lastTransitionTime"] = "2026-06-01T13:59:30+02:00"
    assert ts(ago(seconds=30)) == "2026-06-01T11:59:30Z"
    assert _decide(captf(spec={"variables": {"size": 4}}), [*base_objects(), failed]) == {
        "action": "requeue",
        "op": "apply",
        "reason": "InputsChangedBackoff",
        "after": 30.0,
    }
