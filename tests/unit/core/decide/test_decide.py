"""DecideOp, one case per step and reason of the spec's order (and the seed's tables)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.core.basics.names import (
    ANN_DRIFT_REMEDIATION,
    ANN_INPUTS_HASH,
    ANN_INTERRUPTED_APPLY,
    ANN_PLAN_JOB,
    ANN_RESTORE_SERIAL,
    FINALIZER,
    MACHINE,
    POOL,
)
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.facts import Facts
from controller.core.decide.steps import decide
from controller.core.decide.triggers import jitter
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    approval,
    base_objects,
    capi_cluster,
    captf,
    current_hash,
    decided,
    job,
    labelled,
    lease,
    module_configmap,
    owners_of,
    secret,
    state,
)

NEW_VARS = {"variables": {"size": 4}}  # inputs that differ from the applied state


def _requeue(reason: str, after: float, op: str | None = None) -> Json:
    out: Json = {"action": "requeue"}
    if op:
        out["op"] = op
    return out | {"reason": reason, "after": after}


def _run(op: str, reason: str, retry: int = 1) -> Json:
    return {"action": "run", "op": op, "reason": reason, "retry": retry}


ready_cluster = captf(name="c1", ready=True)
M1_OWNERS = owners_of(captf(MACHINE, "m1"))
inputs_secret = f"c1-inputs-{current_hash()[:8]}"


def _later(seconds: float, op: str, interval: float) -> float:
    """An idle's wait until a scheduled check: the interval left plus the object's jitter
    (these objects' uid is uid-c1)."""
    return round(seconds + jitter("uid-c1", op, interval), 3)


CASES: list[tuple[str, Json, list[Json], Json]] = [
    # 1. The object's own inputs and policy.
    (
        "no runner image: JobPolicyInvalid",
        captf(spec={"jobs": {"image": None}}),
        base_objects(),
        _requeue("JobPolicyInvalid", 600.0),
    ),
    (
        "bad drift interval: JobPolicyInvalid",
        captf(spec={"drift": {"interval": "soon"}}),
        base_objects(),
        _requeue("JobPolicyInvalid", 600.0),
    ),
    (
        "module ConfigMap missing: DurableInputsMissing",
        captf(),
        [secret("creds", {"t": "x"})],
        _requeue("DurableInputsMissing", 600.0),
    ),
    (
        "variablesFrom Secret missing: DurableInputsMissing",
        captf(spec={"variablesFrom": [{"secretRef": {"name": "vars"}}]}),
        base_objects(),
        _requeue("DurableInputsMissing", 600.0),
    ),
    (
        "inputs over the Secret limit: InputsTooLarge",
        captf(),
        [
            module_configmap(data={"main.tf": "#" * (1024 * 1024 + 1)}),
            *(o for o in base_objects() if o["kind"] != "ConfigMap"),
        ],
        _requeue("InputsTooLarge", 600.0),
    ),
    # 2-3. Jobs in flight.
    (
        "activeJob not in the cache: JobCacheBehind",
        captf(status={"activeJob": "c1-apply-00000009"}),
        base_objects(),
        _requeue("JobCacheBehind", 5.0),
    ),
    (
        "a Job still running: JobRunning",
        captf(spec=NEW_VARS),
        [*base_objects(), job("apply", 1, None, state="Running")],
        _requeue("JobRunning", 60.0),
    ),
    # 4. Deleting.
    (
        "deleting: destroy",
        captf(deleting=ago(1), finalizers=[FINALIZER]),
        base_objects(),
        _run("destroy", "Deleting"),
    ),
    (
        "deleting, destroy failed twice: DeletingBackoff",
        captf(deleting=ago(10), finalizers=[FINALIZER]),
        [
            *base_objects(),
            job("destroy", 1, "failed", finished=ago(5)),
            job("destroy", 2, "failed", finished=ago(1)),
        ],
        _requeue("DeletingBackoff", 60.0, op="destroy"),
    ),
    (
        "deleting, destroy failed twice, delay passed: retry 3",
        captf(deleting=ago(10), finalizers=[FINALIZER]),
        [
            *base_objects(),
            job("destroy", 1, "failed", finished=ago(6)),
            job("destroy", 2, "failed", finished=ago(3)),
        ],
        _run("destroy", "Deleting", retry=3),
    ),
    (
        "deleting, destroyed: the finalizer may go",
        captf(deleting=ago(10), finalizers=[FINALIZER]),
        [*base_objects(), job("destroy", 1, "succeeded", finished=ago(1))],
        {"action": "idle", "reason": "Destroyed"},
    ),
    # 5. Restore.
    (
        "restore requested",
        captf(annotations={ANN_RESTORE_SERIAL: "4"}, status={"lastRestoredSerial": 3}),
        base_objects(),
        _run("restore", "RestoreRequested"),
    ),
    (
        "a failed restore is not retried for the same serial",
        captf(annotations={ANN_RESTORE_SERIAL: "4"}),
        [
            *base_objects(),
            job("restore", 1, "failed", annotations={ANN_RESTORE_SERIAL: "4"}),
        ],
        {"action": "idle"},
    ),
    (
        # No backoff, but the retry number counts the failed restore of serial 4, as
        # for every op (1 + the earlier failed Jobs since the last success).
        "a restore's failures count toward no backoff for another serial, but are counted",
        captf(annotations={ANN_RESTORE_SERIAL: "5"}),
        [
            *base_objects(),
            job(
                "restore",
                1,
                "failed",
                finished=ago(seconds=5),
                annotations={ANN_RESTORE_SERIAL: "4"},
            ),
        ],
        _run("restore", "RestoreRequested", retry=2),
    ),
    (
        "a restore's retry number counts only the failures since its last success",
        captf(annotations={ANN_RESTORE_SERIAL: "6"}),
        [
            *base_objects(),
            *(
                job(
                    "restore",
                    seq,
                    outcome,
                    finished=ago(minutes=10 - seq),
                    annotations={ANN_RESTORE_SERIAL: str(seq)},
                )
                for seq, outcome in enumerate(["failed", "succeeded", "failed", "failed"], 1)
            ),
        ],
        _run("restore", "RestoreRequested", retry=3),
    ),
    # 6. Readiness of what the object needs.
    (
        "credentials Secret missing: CredentialsNotReady",
        captf(),
        [capi_cluster(), module_configmap(), state(inputs=current_hash())],
        _requeue("CredentialsNotReady", 30.0),
    ),
    (
        "a dependency not Ready: DependenciesNotReady",
        captf(spec={"dependsOn": [{"kind": "TerraformCluster", "name": "net"}]}),
        [*base_objects(), captf(name="net", ready=False)],
        _requeue("DependenciesNotReady", 30.0),
    ),
    (
        "a dependency missing: DependenciesNotReady",
        captf(spec={"dependsOn": [{"kind": "TerraformCluster", "name": "net"}]}),
        base_objects(),
        _requeue("DependenciesNotReady", 30.0),
    ),
    (
        "a pool's cluster not Ready: OwnerNotReady",
        captf(POOL, "p1"),
        [
            module_configmap("p1"),
            secret("creds", {"t": "x"}),
            captf(name="c1", ready=False),
            *owners_of(captf(POOL, "p1")),
        ],
        _requeue("OwnerNotReady", 30.0),
    ),
    # 7. State.
    (
        "state serial not an integer: StateUnreadable",
        captf(),
        [*base_objects(applied=False), state(serial="seven", inputs=current_hash())],
        _requeue("StateUnreadable", 60.0),
    ),
    (
        "state Secret gone after an apply: StateLost",
        captf(status={"stateSerial": 4}),
        base_objects(applied=False),
        _requeue("StateLost", 60.0),
    ),
    # 8. Approvals.
    (
        "blocked apply: WaitingForApproval",
        captf(spec=NEW_VARS),
        [*base_objects(), job("apply", 1, "blocked")],
        _requeue("WaitingForApproval", 600.0),
    ),
    (
        "blocked apply approved: apply runs (retry 1: blocked counts nowhere)",
        captf(spec=NEW_VARS),
        [*base_objects(), job("apply", 1, "blocked"), approval("c1-apply-00000001", {"size": 4})],
        _run("apply", "InputsChanged"),
    ),
    (
        "plan-changed: WaitingForApproval",
        captf(spec=NEW_VARS),
        [
            *base_objects(),
            job(
                "apply",
                1,
                "plan-changed",
                annotations={ANN_INPUTS_HASH: current_hash(variables={"size": 4})},
            ),
        ],
        _requeue("WaitingForApproval", 600.0),
    ),
    (
        "plan-changed, then new inputs: the wait ends",
        captf(spec={"variables": {"size": 5}}),
        [
            *base_objects(),
            job(
                "apply",
                1,
                "plan-changed",
                annotations={ANN_INPUTS_HASH: current_hash(variables={"size": 4})},
            ),
        ],
        _run("apply", "InputsChanged"),
    ),
    (
        "Manual: an apply is preceded by a plan carrying its trigger",
        captf(spec=NEW_VARS | {"approval": {"mode": "Manual"}}),
        base_objects(),
        _run("plan", "InputsChanged"),
    ),
    (
        "Manual: an unused plan waits for approval",
        captf(spec=NEW_VARS | {"approval": {"mode": "Manual"}}),
        [
            *base_objects(),
            secret("c1-plan-1", {"tfplan": "x"}),
            job("plan", 1, "succeeded", result={"planSecret": "c1-plan-1"}),
        ],
        _requeue("WaitingForApproval", 600.0),
    ),
    (
        "Manual: an approved plan is applied",
        captf(spec=NEW_VARS | {"approval": {"mode": "Manual"}}),
        [
            *base_objects(),
            secret("c1-plan-1", {"tfplan": "x"}),
            job("plan", 1, "succeeded", result={"planSecret": "c1-plan-1"}),
            approval("c1-plan-00000001", {"size": 4}),
        ],
        _run("apply", "InputsChanged"),
    ),
    (
        "Manual: a plan whose Secret is unreadable failed; the next plan backs off",
        captf(spec=NEW_VARS | {"approval": {"mode": "Manual"}}),
        [
            *base_objects(),
            job("plan", 1, "succeeded", result={"planSecret": "gone"}, finished=ago(seconds=30)),
        ],
        _requeue("InputsChangedBackoff", 30.0, op="plan"),
    ),
    # 9. Apply triggers.
    (
        "never applied: InputsChanged",
        captf(),
        base_objects(applied=False),
        _run("apply", "InputsChanged"),
    ),
    (
        "inputs differ from the state's: InputsChanged",
        captf(spec=NEW_VARS),
        base_objects(),
        _run("apply", "InputsChanged"),
    ),
    (
        "inputs differ, one failure a minute ago: retry 2",
        captf(spec=NEW_VARS),
        [*base_objects(), job("apply", 1, "failed", finished=ago(1))],
        _run("apply", "InputsChanged", retry=2),
    ),
    (
        "inputs differ, failed 30 s ago: InputsChangedBackoff 30 s",
        captf(spec=NEW_VARS),
        [*base_objects(), job("apply", 1, "failed", finished=ago(seconds=30))],
        _requeue("InputsChangedBackoff", 30.0, op="apply"),
    ),
    (
        "inputs equal the state, newest apply failed: LastApplyFailed",
        captf(),
        [
            *base_objects(),
            job("apply", 1, "succeeded", finished=ago(30)),
            job("apply", 2, "failed", finished=ago(20)),
        ],
        _run("apply", "LastApplyFailed", retry=2),
    ),
    (
        "LastApplyFailed ignores drift remediations",
        captf(),
        [
            *base_objects(),
            job("apply", 1, "succeeded", finished=ago(30)),
            job(
                "apply", 2, "failed", finished=ago(20), annotations={ANN_DRIFT_REMEDIATION: "true"}
            ),
        ],
        {"action": "idle"},
    ),
    (
        "an apply deleted while it ran: InterruptedApply",
        captf(),
        [
            *base_objects(),
            labelled(
                secret(
                    inputs_secret,
                    {"variables.json": "{}"},
                    **{ANN_INTERRUPTED_APPLY: "c1-apply-00000003"},
                )
            ),
        ],
        _run("apply", "InterruptedApply"),
    ),
    (
        "machine without state: NoState",
        captf(MACHINE, "m1"),
        [module_configmap("m1"), secret("creds", {"t": "x"}), ready_cluster, *M1_OWNERS],
        _run("apply", "NoState"),
    ),
    (
        "machine state without inputs hash: StateWithoutInputsHash",
        captf(MACHINE, "m1"),
        [
            module_configmap("m1"),
            secret("creds", {"t": "x"}),
            ready_cluster,
            state("m1", 2),
            *M1_OWNERS,
        ],
        _run("apply", "StateWithoutInputsHash"),
    ),
    (
        "a machine's interrupted apply records nothing: no InterruptedApply",
        captf(MACHINE, "m1"),
        [
            module_configmap("m1"),
            secret("creds", {"t": "x"}),
            ready_cluster,
            state("m1", 2, inputs=current_hash()),
            *M1_OWNERS,
        ],
        {"action": "idle"},
    ),
    (
        "drift detected, remediation on: DriftRemediation",
        captf(spec={"drift": {"interval": "1h", "remediate": True}}),
        [
            *base_objects(),
            job("apply", 1, "succeeded", finished=ago(60)),
            job("drift", 1, "succeeded", finished=ago(10), result={"drift": True}),
        ],
        _run("apply", "DriftRemediation"),
    ),
    (
        "drift detected, remediation off: idle until the next check",
        captf(spec={"drift": {"interval": "1h"}}),
        [
            *base_objects(),
            job("apply", 1, "succeeded", finished=ago(60)),
            job("drift", 1, "succeeded", finished=ago(10), result={"drift": True}),
        ],
        {"action": "idle", "after": _later(3000.0, "drift", 3600)},
    ),
    (
        "remediation cap: L failed remediations since the check stop remediating",
        captf(
            spec={
                "drift": {"interval": "1h", "remediate": True},
                "jobs": {"failedJobsHistoryLimit": 2},
            }
        ),
        [
            *base_objects(),
            job("drift", 1, "succeeded", finished=ago(50), result={"drift": True}),
            job(
                "apply", 1, "failed", finished=ago(40), annotations={ANN_DRIFT_REMEDIATION: "true"}
            ),
            job(
                "apply", 2, "failed", finished=ago(20), annotations={ANN_DRIFT_REMEDIATION: "true"}
            ),
        ],
        {"action": "idle", "after": _later(600.0, "drift", 3600)},
    ),
    (
        "remediation cap: a remediation failing within its check's second still counts",
        captf(
            spec={
                "drift": {"interval": "1h", "remediate": True},
                "jobs": {"failedJobsHistoryLimit": 1},
            }
        ),
        [
            *base_objects(),
            job("drift", 1, "succeeded", finished=ago(50), result={"drift": True}),
            job(
                "apply", 1, "failed", finished=ago(50), annotations={ANN_DRIFT_REMEDIATION: "true"}
            ),
        ],
        {"action": "idle", "after": _later(600.0, "drift", 3600)},
    ),
    (
        "remediation below the cap: retried with backoff",
        captf(
            spec={
                "drift": {"interval": "1h", "remediate": True},
                "jobs": {"failedJobsHistoryLimit": 3},
            }
        ),
        [
            *base_objects(),
            job("drift", 1, "succeeded", finished=ago(50), result={"drift": True}),
            job(
                "apply", 1, "failed", finished=ago(40), annotations={ANN_DRIFT_REMEDIATION: "true"}
            ),
            job("apply", 2, "failed", finished=ago(1), annotations={ANN_DRIFT_REMEDIATION: "true"}),
        ],
        _requeue("DriftRemediationBackoff", 60.0, op="apply"),
    ),
    # Leases.
    (
        "every run slot held: WaitingForRunLease",
        captf(spec=NEW_VARS),
        [*base_objects(), *(lease(f"captf-run-slot-{i}", holder=f"other-{i}") for i in range(10))],
        _requeue("WaitingForRunLease", 30.0),
    ),
    (
        "a free run slot: runs",
        captf(spec=NEW_VARS),
        [*base_objects(), *(lease(f"captf-run-slot-{i}", holder=f"other-{i}") for i in range(9))],
        _run("apply", "InputsChanged"),
    ),
    (
        "a pool while its cluster runs: WaitingForClusterOperation",
        captf(POOL, "p1"),
        [
            module_configmap("p1"),
            secret("creds", {"t": "x"}),
            ready_cluster,
            *owners_of(captf(POOL, "p1")),
            lease(
                "captf-op-terraformcluster-c1",
                holder="c1-apply-00000002",
                labels={"captf.io/cluster": "c1", "captf.io/scope": "cluster"},
            ),
        ],
        _requeue("WaitingForClusterOperation", 30.0),
    ),
    (
        "a cluster while a member runs: WaitingForMachineOperations",
        captf(spec=NEW_VARS),
        [
            *base_objects(),
            lease(
                "captf-op-terraformmachine-m1",
                holder="m1-apply-00000001",
                labels={"captf.io/cluster": "c1", "captf.io/scope": "member"},
            ),
        ],
        _requeue("WaitingForMachineOperations", 30.0),
    ),
    (
        "a released member Lease does not block",
        captf(spec=NEW_VARS),
        [
            *base_objects(),
            lease(
                "captf-op-terraformmachine-m1",
                holder=None,
                labels={"captf.io/cluster": "c1", "captf.io/scope": "member"},
            ),
        ],
        _run("apply", "InputsChanged"),
    ),
    # 10-11. Schedules.
    (
        "drift interval elapsed since the last check: DriftCheckDue",
        captf(spec={"drift": {"interval": "30m"}}),
        [
            *base_objects(),
            job("apply", 1, "succeeded", finished=ago(90)),
            # 30m and its jitter, at most a tenth of it, have passed.
            job("drift", 1, "succeeded", finished=ago(34), result={"drift": False}),
        ],
        _run("drift", "DriftCheckDue"),
    ),
    (
        "no drift Job yet: measured from the newest successful apply",
        captf(spec={"drift": {"interval": "30m"}, "refresh": {"interval": "2h"}}),
        [*base_objects(), job("apply", 1, "succeeded", finished=ago(20))],
        {"action": "idle", "after": _later(600.0, "drift", 1800)},
    ),
    (
        "refresh due",
        captf(spec={"refresh": {"interval": "1h"}}),
        [*base_objects(), job("apply", 1, "succeeded", finished=ago(67))],
        _run("refresh", "RefreshDue"),
    ),
    (
        "nothing scheduled: idle",
        captf(),
        base_objects(),
        {"action": "idle"},
    ),
]


@pytest.mark.parametrize(
    ("obj", "others", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(obj: Json, others: list[Json], expected: Json) -> None:
    assert decided(obj, others) == expected


def test_manual_approved_plan_names_the_plan_job() -> None:
    obj = captf(spec=NEW_VARS | {"approval": {"mode": "Manual"}})
    plan = job("plan", 1, "succeeded", result={"planSecret": "c1-plan-1"})
    others = [
        *base_objects(),
        secret("c1-plan-1", {"tfplan": "x"}),
        plan,
        approval("c1-plan-00000001", {"size": 4}),
    ]
    decision = decide(snapshot.build(obj, others), NOW)
    assert to_json(decision, verbose=True)["planJob"] == "c1-plan-00000001"
    used = job(
        "apply", 1, "failed", annotations={ANN_PLAN_JOB: "c1-plan-00000001"}, finished=ago(5)
    )
    after_use = decide(snapshot.build(obj, [*others, used]), NOW)
    assert to_json(after_use) == _run("plan", "InputsChanged")


def test_guard_applies_until_the_blocked_apply_is_approved() -> None:
    blocked = job("apply", 1, "blocked")
    plain = decide(snapshot.build(captf(spec=NEW_VARS), base_objects()), NOW)
    approved = decide(
        snapshot.build(
            captf(spec=NEW_VARS),
            [*base_objects(), blocked, approval(blocked["metadata"]["name"], {"size": 4})],
        ),
        NOW,
    )
    allowed = decide(
        snapshot.build(
            captf(spec=NEW_VARS | {"guard": {"allowDestructive": True}}), base_objects()
        ),
        NOW,
    )
    assert to_json(plain, verbose=True)["guarded"] is True
    assert to_json(approved, verbose=True)["guarded"] is False
    assert to_json(allowed, verbose=True)["guarded"] is False


def test_pending_create_is_cache_behind() -> None:
    snap = snapshot.build(captf(spec=NEW_VARS), base_objects())
    pending = Facts(pending_jobs=frozenset({"c1-apply-x"}))
    assert to_json(decide(snap, NOW, facts=pending)) == _requeue("JobCacheBehind", 5.0)


def test_no_drift_or_refresh_before_the_first_successful_apply() -> None:
    from controller.core.decide.context import Context
    from controller.core.decide.triggers import scheduled
    from controller.core.spec.inputs import render
    from controller.core.spec.policy import read_policy

    obj = captf(spec={"drift": {"interval": "1m"}, "refresh": {"interval": "1m"}})
    failed_only = [*base_objects(applied=False), job("apply", 1, "failed", finished=ago(30))]
    snap = snapshot.build(obj, failed_only)
    ctx = Context(
        snap, NOW, read_policy(snap.spec), render(snap.spec, snap.configmaps, snap.secrets)
    )
    assert scheduled(ctx, "drift") is None
    assert scheduled(ctx, "refresh") is None
    applied = snapshot.build(obj, [*failed_only, job("apply", 2, "succeeded", finished=ago(2))])
    ctx2 = Context(applied, NOW, ctx.policy, ctx.inputs)
    assert scheduled(ctx2, "drift") == ago(1) + timedelta(seconds=jitter("uid-c1", "drift", 60))


def test_a_lease_held_for_the_job_this_decision_would_create_is_ours() -> None:
    """A crash between taking the Leases and creating the Job leaves them held in the name
    of the Job the same decision creates again: they must not make the object wait."""
    from controller.core.jobs.naming import job_name

    planned = job_name("c1", "uid-c1", "apply", 1)
    slots = [lease(f"captf-run-slot-{i}", holder=f"other-{i}") for i in range(9)]
    slots.append(lease("captf-run-slot-9", holder=planned))
    snap = snapshot.build(captf(spec=NEW_VARS), [*base_objects(), *slots])
    assert to_json(decide(snap, NOW)) == _run("apply", "InputsChanged")
    slots[-1] = lease("captf-run-slot-9", holder=job_name("c1", "uid-c1", "apply", 2))
    snap = snapshot.build(captf(spec=NEW_VARS), [*base_objects(), *slots])
    assert to_json(decide(snap, NOW)) == _requeue("WaitingForRunLease", 30.0)
