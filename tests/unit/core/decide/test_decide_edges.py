"""DecideOp on snapshots built from the spec's words where the first version read them
differently: each case failed before its fix in controller/core."""

from __future__ import annotations

import pytest

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_INPUTS_HASH,
    ANN_RESTORE_SERIAL,
    ANN_SEQ,
    MACHINE,
    POOL,
)
from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue, to_json
from controller.core.decide.steps import decide
from controller.core.decide.triggers import jitter
from controller.core.jobs.backoff import delay
from controller.core.jobs.history import History
from controller.core.jobs.naming import job_name
from controller.core.plan import accounting
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    approval,
    base_objects,
    captf,
    current_hash,
    decided,
    job,
    lease,
    module_configmap,
    owners_of,
    secret,
    state,
    ts,
)

MANUAL = {"approval": {"mode": "Manual"}}


def test_delay_with_a_huge_limit_is_the_cap_not_an_overflow() -> None:
    assert delay(5000, 1_000_000) == 600.0
    assert delay(1100, 2000) == 600.0


def test_a_job_in_another_namespace_is_not_the_objects() -> None:
    foreign = job("apply", 1, "failed", finished=ago(seconds=30))
    foreign["metadata"]["namespace"] = "elsewhere"
    del foreign["metadata"]["labels"]["captf.io/uid"]  # matched by name label only
    obj = captf(spec={"variables": {"size": 4}})
    assert decided(obj, [*base_objects(), foreign]) == {
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
    assert decided(obj, others) == {"action": "idle"}


def test_manual_plan_without_a_later_apply_still_waits() -> None:
    plan = job("plan", 1, "succeeded", result={"planSecret": "c1-plan-1"}, finished=ago(30))
    apply = job("apply", 1, "succeeded", finished=ago(40), created=ago(45))
    obj = captf(spec=MANUAL | {"variables": {"size": 4}})
    others = [*base_objects(), secret("c1-plan-1", {"tfplan": "x"}), plan, apply]
    assert decided(obj, others) == {
        "action": "requeue",
        "reason": "WaitingForApproval",
        "after": 600.0,
    }


def test_drift_is_due_when_the_state_shows_an_apply_but_no_job_is_left() -> None:
    obj = captf(spec={"drift": {"interval": "1h"}})
    assert decided(obj, base_objects()) == {
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
    assert decided(obj, [*base_objects(), old]) == {
        "action": "run",
        "op": "restore",
        "reason": "RestoreRequested",
        "retry": 2,  # the failed restore before it counts, as an earlier failure of any op
    }


def test_restore_not_yet_accounted_blocks_a_second_attempt() -> None:
    fresh = job("restore", 1, "failed", finished=ago(1), annotations={ANN_RESTORE_SERIAL: "4"})
    obj = captf(annotations={ANN_RESTORE_SERIAL: "4"})
    assert decided(obj, [*base_objects(), fresh]) == {"action": "idle"}


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        # "03" asks for serial 3, which lastRestoredSerial says was tried: no restore.
        ("03", {"action": "idle"}),
        ("3", {"action": "idle"}),
        # Not a serial: no request. Before, each was a restore that never recorded
        # lastRestoredSerial, so it ran again as soon as it was accounted.
        ("abc", {"action": "idle"}),
        ("-1", {"action": "idle"}),
        ("\u0664", {"action": "idle"}),
        ("4", {"action": "run", "op": "restore", "reason": "RestoreRequested", "retry": 1}),
    ],
)
def test_a_restore_serial_is_read_as_a_number(requested: str, expected: Json) -> None:
    obj = captf(annotations={ANN_RESTORE_SERIAL: requested}, status={"lastRestoredSerial": 3})
    assert decided(obj, base_objects()) == expected


def test_a_dependency_with_null_conditions_is_not_ready() -> None:
    dep = captf(name="net")
    dep["status"] = {"conditions": None}
    obj = captf(spec={"dependsOn": [{"kind": "TerraformCluster", "name": "net"}]})
    assert decided(obj, [*base_objects(), dep])["reason"] == "DependenciesNotReady"


@pytest.mark.parametrize("days", [5, "Mon", [1], {"Mon": True}])
def test_window_days_that_are_not_a_list_of_names_are_an_invalid_policy(days: object) -> None:
    window = {"start": "10:00", "duration": "1h", "days": days}
    obj = captf(spec={"variables": {"size": 4}, "changeWindows": [window]})
    out = decide(snapshot.build(obj, base_objects()), NOW)
    assert isinstance(out, Requeue)
    assert out.reason == "JobPolicyInvalid"
    assert "changeWindows[0].days" in (out.message or "")


def test_an_overlong_seq_annotation_is_no_sequence() -> None:
    weird = job("apply", 1, "failed", finished=ago(seconds=5), annotations={ANN_SEQ: "9" * 5000})
    obj = captf(spec={"variables": {"size": 4}})
    assert decided(obj, [*base_objects(), weird])["reason"] == "InputsChangedBackoff"


def test_a_null_limit_takes_the_default() -> None:
    obj = captf(spec={"variables": {"size": 4}, "jobs": {"failedJobsHistoryLimit": None}})
    obj["spec"]["jobs"]["failedJobsHistoryLimit"] = None
    failures = [
        job("apply", 1, "failed", finished=ago(5)),
        job("apply", 2, "failed", finished=ago(seconds=90)),
    ]
    # Default limit 3: two failures wait 2m from the newest, 30 s left.
    assert decided(obj, [*base_objects(), *failures]) == {
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
    waiting = decided(captf(spec={"variables": {"size": 4}}), [*base_objects(), changed])
    assert waiting["reason"] == "WaitingForApproval"
    moved_on = decided(captf(spec={"variables": {"size": 5}}), [*base_objects(), changed])
    assert moved_on == {"action": "run", "op": "apply", "reason": "InputsChanged", "retry": 1}


def test_times_with_offsets_are_read_as_instants() -> None:
    failed = job("apply", 1, "failed", finished=ago(seconds=30))
    # The same instant as +02:00: 11:59:30Z == 13:59:30+02:00.
    for cond in failed["status"]["conditions"]:
        cond["lastTransitionTime"] = "2026-06-01T13:59:30+02:00"
    assert ts(ago(seconds=30)) == "2026-06-01T11:59:30Z"
    assert decided(captf(spec={"variables": {"size": 4}}), [*base_objects(), failed]) == {
        "action": "requeue",
        "op": "apply",
        "reason": "InputsChangedBackoff",
        "after": 30.0,
    }


def _pool_snapshot(cluster: Json, *extra: Json) -> Json:
    pool = captf(POOL, "p1", spec={"variables": {"size": 4}})
    others = [module_configmap("p1"), secret("creds", {"t": "x"}), cluster, *extra]
    return decided(pool, [*others, *owners_of(pool)])


def test_a_pool_waits_while_its_cluster_shows_an_active_job() -> None:
    # "a pool or machine while its cluster runs a Job": the cluster's status.activeJob
    # says so even when the snapshot carries no operation Lease.
    busy = captf(name="c1", ready=True)
    busy["status"]["activeJob"] = "c1-refresh-00000001"
    assert _pool_snapshot(busy) == {
        "action": "requeue",
        "reason": "WaitingForClusterOperation",
        "after": 30.0,
    }
    idle = captf(name="c1", ready=True)
    assert _pool_snapshot(idle)["action"] == "run"


def test_a_cluster_waits_while_a_member_shows_an_active_job() -> None:
    member = captf(MACHINE, "m1", status={"activeJob": "m1-apply-00000001"})
    elsewhere = captf(MACHINE, "m2", cluster="other")
    elsewhere["status"]["activeJob"] = "m2-apply-00000001"
    obj = captf(spec={"variables": {"size": 4}})
    assert decided(obj, [*base_objects(), member]) == {
        "action": "requeue",
        "reason": "WaitingForMachineOperations",
        "after": 30.0,
    }
    assert decided(obj, [*base_objects(), elsewhere])["action"] == "run"


def test_a_member_lease_is_known_by_its_name_without_labels() -> None:
    member = captf(MACHINE, "m1")
    held = lease("captf-op-terraformmachine-m1", holder="m1-apply-00000001")
    obj = captf(spec={"variables": {"size": 4}})
    assert decided(obj, [*base_objects(), member, held])["reason"] == (
        "WaitingForMachineOperations"
    )


def test_approving_a_blocked_apply_does_not_unguard_inputs_changed_since() -> None:
    blocked = job("apply", 1, "blocked", finished=ago(10))
    blocked["metadata"]["annotations"][ANN_INPUTS_HASH] = current_hash(variables={"size": 4})
    # Its plan approved for the inputs it ran with (size 4); then the inputs change.
    approve = approval(blocked["metadata"]["name"], {"size": 4})
    same = captf(spec={"variables": {"size": 4}})
    changed = captf(spec={"variables": {"size": 5}})
    others = [*base_objects(), blocked, approve]
    unguarded = to_json(decide(snapshot.build(same, others), NOW), verbose=True)
    guarded = to_json(decide(snapshot.build(changed, others), NOW), verbose=True)
    assert (unguarded["reason"], unguarded["guarded"]) == ("InputsChanged", False)
    assert (guarded["reason"], guarded["guarded"]) == ("InputsChanged", True)


def _timeless(job_: Json, **status: str) -> Json:
    """The Job with its terminal condition but no time on it (a hand-made snapshot)."""
    conditions = [{"type": c["type"], "status": "True"} for c in job_["status"]["conditions"]]
    job_["status"] = {"conditions": conditions, **status}
    del job_["metadata"]["creationTimestamp"]
    return job_


def test_a_finished_job_without_any_time_is_still_read() -> None:
    blocked = _timeless(job("apply", 1, "blocked"))
    obj = captf(spec={"variables": {"size": 4}})
    assert decided(obj, [*base_objects(), blocked]) == {
        "action": "requeue",
        "reason": "WaitingForApproval",
        "after": 600.0,
    }
    failed = _timeless(job("apply", 1, "failed"))
    assert decided(obj, [*base_objects(), failed]) == {
        "action": "run",
        "op": "apply",
        "reason": "InputsChanged",
        "retry": 2,
    }


def test_a_finished_job_without_a_finish_time_finished_no_later_than_it_started() -> None:
    failed = _timeless(job("apply", 1, "failed"), startTime=ts(ago(seconds=20)))
    obj = captf(spec={"variables": {"size": 4}})
    assert decided(obj, [*base_objects(), failed]) == {
        "action": "requeue",
        "op": "apply",
        "reason": "InputsChangedBackoff",
        "after": 40.0,
    }


def test_an_operation_lease_of_another_namespace_does_not_block() -> None:
    labels = {"captf.io/cluster": "c1", "captf.io/scope": "cluster"}
    here = lease("captf-op-terraformcluster-c1", holder="c1-apply-00000002", labels=labels)
    there = lease("captf-op-terraformcluster-c1", holder="c1-apply-00000002", labels=labels)
    there["metadata"]["namespace"] = "team-b"
    assert _pool_snapshot(captf(name="c1", ready=True), here)["action"] == "requeue"
    assert _pool_snapshot(captf(name="c1", ready=True), there)["action"] == "run"


def _bare(job_: Json, name: str) -> Json:
    """The Job with neither labels nor owner references, named by hand."""
    job_["metadata"]["name"] = name
    del job_["metadata"]["labels"]
    return job_


def test_a_bare_job_is_the_objects_by_its_name() -> None:
    obj = captf(spec={"variables": {"size": 4}})
    ours = _bare(job("apply", 1, "failed", finished=ago(2)), "c1-apply")
    theirs = _bare(job("apply", 2, "failed", finished=ago(2)), "c10-apply-00000001")
    owned = _bare(job("apply", 3, "failed", finished=ago(2)), "c1-apply-00000003")
    owned["metadata"]["ownerReferences"] = [{"kind": "TerraformCluster", "name": "c9"}]
    assert decided(obj, [*base_objects(), ours, theirs, owned]) == {
        "action": "run",
        "op": "apply",
        "reason": "InputsChanged",
        "retry": 2,
    }


def test_an_interval_beyond_a_go_duration_is_a_policy_error_not_a_crash() -> None:
    longest = captf(spec={"drift": {"interval": "2562047h"}})
    applied = job("apply", 1, "succeeded", finished=ago(1))
    assert decided(longest, [*base_objects(), applied]) == {
        "action": "idle",
        "after": round(2562047 * 3600.0 - 60.0 + jitter("uid-c1", "drift", 2562047 * 3600.0), 3),
    }
    beyond = captf(spec={"drift": {"interval": "99999999h"}})
    assert decided(beyond, [*base_objects(), applied]) == {
        "action": "requeue",
        "reason": "JobPolicyInvalid",
        "after": 600.0,
    }


def _named(job_: Json, seq: int) -> Json:
    """The Job under its real, hashed name, with its attempt sequence."""
    op = job_["metadata"]["labels"]["captf.io/op"]
    job_["metadata"]["name"] = job_name("c1", "uid-c1", op, seq)
    job_["metadata"]["annotations"][ANN_SEQ] = str(seq)
    return job_


@pytest.mark.parametrize("first", [1, 3, 5, 7])
def test_jobs_finishing_in_the_same_second_are_ordered_by_attempt(first: int) -> None:
    # Job times have one-second resolution; hashed names say nothing about order. The
    # success created after the failure (a higher sequence) is the newest: no failures.
    at = ago(seconds=20)
    failed = _named(job("apply", 1, "failed", finished=at, created=ago(seconds=40)), first)
    applied = _named(job("apply", 2, "succeeded", finished=at, created=ago(seconds=30)), first + 1)
    obj = captf(spec={"variables": {"size": 4}})
    assert decided(obj, [*base_objects(), failed, applied]) == {
        "action": "run",
        "op": "apply",
        "reason": "InputsChanged",
        "retry": 1,
    }
    # The other way round (the failure is the later attempt): one failure, 1m from it.
    failed = _named(job("apply", 1, "failed", finished=at, created=ago(seconds=30)), first + 1)
    applied = _named(job("apply", 2, "succeeded", finished=at, created=ago(seconds=40)), first)
    assert decided(obj, [*base_objects(), failed, applied]) == {
        "action": "requeue",
        "op": "apply",
        "reason": "InputsChangedBackoff",
        "after": 40.0,
    }


@pytest.mark.parametrize("serial", ["1_000", " 3", "3 ", "\u0663", "3.0", "", "0x3"])
def test_a_state_serial_that_is_not_a_plain_integer_is_unreadable(serial: str) -> None:
    # Python's int() also reads "1_000", " 3" and other scripts' digits; the serial
    # annotation of a state Secret is a plain decimal integer or unreadable.
    objects = [*base_objects(applied=False), state(serial=serial, inputs=current_hash())]
    assert decided(captf(), objects) == {
        "action": "requeue",
        "reason": "StateUnreadable",
        "after": 60.0,
    }


@pytest.mark.parametrize("serial", ["0", "7", "-1", "+2"])
def test_a_plain_integer_state_serial_is_readable(serial: str) -> None:
    objects = [*base_objects(applied=False), state(serial=serial, inputs=current_hash())]
    assert decided(captf(), objects) == {"action": "idle"}


def test_manual_approving_a_blocked_apply_reruns_the_apply_not_a_new_plan() -> None:
    # Manual: plan -> approval -> apply, and the guard blocked that apply. Approving the
    # blocked apply approves the destruction of the plan it carried out (the plan before
    # it), so the apply runs unguarded; a new plan would need approving again and its
    # apply would be guarded, and block, again. The blocked Job need not name its plan.
    plan = job("plan", 1, "succeeded", result={"planSecret": "c1-plan-1"}, finished=ago(10))
    blocked = job("apply", 1, "blocked", finished=ago(5), created=ago(8))
    obj = captf(spec=MANUAL | {"variables": {"size": 4}})
    approve = approval(blocked["metadata"]["name"], {"size": 4})
    others = [*base_objects(), secret("c1-plan-1", {"tfplan": "x"}), plan, blocked, approve]
    out = to_json(decide(snapshot.build(obj, others), NOW), verbose=True)
    assert out == {
        "action": "run",
        "op": "apply",
        "reason": "InputsChanged",
        "retry": 1,
        "guarded": False,
        "driftRemediation": False,
        "planJob": plan["metadata"]["name"],
        "message": "inputs 4994132a are not the ones the state was applied with; "
        "carrying out approved plan c1-plan-00000001",
    }
    # Without a plan before it (none left), a plan runs first, as for any Manual apply.
    assert decided(obj, [*base_objects(), blocked, approve])["op"] == "plan"


def _manual_after_an_apply(outcome: str, *, approved: bool, variables: Json) -> Json:
    """Manual: plan 1, its apply ended `outcome` (run with size 4), then plan 2 succeeded."""
    ran_with = {ANN_INPUTS_HASH: current_hash(variables={"size": 4})}
    plan1 = job("plan", 1, "succeeded", result={"planSecret": "p1"}, finished=ago(20))
    apply = job("apply", 1, outcome, finished=ago(15), created=ago(18), annotations=ran_with)
    plan2 = job("plan", 2, "succeeded", result={"planSecret": "p2"}, finished=ago(5))
    obj = captf(spec=MANUAL | {"variables": variables})
    plans = [secret("p1", {"tfplan": "x"}), secret("p2", {"tfplan": "y"})]
    if approved:
        plans.append(approval(apply["metadata"]["name"], variables))
    return decided(obj, [*base_objects(), *plans, plan1, apply, plan2])


@pytest.mark.parametrize(
    ("outcome", "approved", "variables"),
    [
        ("plan-changed", True, {"size": 4}),  # approved: a new plan was made
        ("plan-changed", False, {"size": 5}),  # new inputs ended the wait: a new plan
        ("blocked", True, {"size": 5}),  # approved, but the inputs changed: a new plan
    ],
)
def test_manual_a_new_plan_after_an_approved_or_ended_wait_waits_for_its_own_approval(
    outcome: str, approved: bool, variables: Json
) -> None:
    # Each wait of step 8 holds on its own: the newest apply's (blocked, plan-changed)
    # and, in Manual mode, the newest unused plan's. Approving the apply does not
    # approve a plan made after it; before, a plan followed a plan without an approval.
    assert _manual_after_an_apply(outcome, approved=approved, variables=variables) == {
        "action": "requeue",
        "reason": "WaitingForApproval",
        "after": 600.0,
    }


@pytest.mark.parametrize(
    ("outcome", "variables"),
    [("plan-changed", {"size": 4}), ("plan-changed", {"size": 5}), ("blocked", {"size": 5})],
)
def test_manual_approving_the_new_plan_runs_its_apply(outcome: str, variables: Json) -> None:
    # The apply's wait ended when the new plan was made; approving that plan is enough
    # (the annotation names one Job: the apply's wait must not come back).
    ran_with = {ANN_INPUTS_HASH: current_hash(variables={"size": 4})}
    plan1 = job("plan", 1, "succeeded", result={"planSecret": "p1"}, finished=ago(20))
    apply = job("apply", 1, outcome, finished=ago(15), created=ago(18), annotations=ran_with)
    plan2 = job("plan", 2, "succeeded", result={"planSecret": "p2"}, finished=ago(5))
    obj = captf(spec=MANUAL | {"variables": variables})
    plans = [secret("p1", {"tfplan": "x"}), secret("p2", {"tfplan": "y"})]
    plans.append(approval(plan2["metadata"]["name"], variables))
    others = [*base_objects(), *plans, plan1, apply, plan2]
    out = to_json(decide(snapshot.build(obj, others), NOW), verbose=True)
    assert (out["action"], out.get("op"), out.get("planJob")) == (
        "run",
        "apply",
        plan2["metadata"]["name"],
    )


def test_the_attempt_number_counts_a_failure_in_the_same_second_before_it() -> None:
    # captf_job_attempts for a Job without its stamped retry: 1 + the op's counted
    # failures before it. The earlier attempt that finished in the same second is one.
    at = ago(seconds=20)
    first = _named(job("apply", 1, "failed", finished=at, created=ago(seconds=40)), 1)
    second = _named(job("apply", 2, "failed", finished=at, created=ago(seconds=30)), 2)
    history = History([first, second], lambda _job: True)
    numbers = {r.name: accounting.attempt_number(history, r) for r in history}
    assert numbers == {first["metadata"]["name"]: 1, second["metadata"]["name"]: 2}
