"""Cluster API's owners: whom an object acts for (refs.py), the waits until it may act
(decide/owners.py), and pause, move, external management and deletion order
(decide/pause.py), as DecideOp and the plan see them."""

from __future__ import annotations

import pytest

from controller.core.basics.names import (
    ANN_BLOCK_MOVE,
    ANN_DELETE_FOR_MOVE,
    ANN_EXTERNALLY_MANAGED,
    ANN_PAUSED,
    CAPI_CLUSTER,
    CAPI_MACHINE,
    FINALIZER,
    MACHINE,
    POOL,
)
from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue
from controller.core.decide.steps import STEPS, decide
from controller.core.plan.planner import plan_pass
from controller.core.spec.refs import (
    ObjectRef,
    bootstrap_secret_of,
    cluster_name_of,
    cluster_of,
    owner_of,
    terraform_cluster_of,
)
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    base_objects,
    bootstrap_secret,
    capi_cluster,
    capi_machine,
    capi_pool,
    captf,
    current_hash,
    decided,
    job,
    module_configmap,
    owners_of,
    secret,
    state,
)

NEW_VARS = {"variables": {"size": 4}}


def _member_world(kind: str = MACHINE, **owners: Json | None) -> list[Json]:
    """What a member named m1 needs, each part replaceable (None: absent)."""
    parts: dict[str, Json | None] = {
        "owner": capi_machine("m1") if kind == MACHINE else capi_pool("m1"),
        "bootstrap": bootstrap_secret("m1"),
        "cluster": capi_cluster("c1"),
        "tc": captf(name="c1", ready=True),
    }
    parts |= owners
    found = [p for p in parts.values() if p is not None]
    return [module_configmap("m1"), secret("creds", {"t": "x"}), *found]


def _requeue(reason: str, after: float = 60.0) -> Json:
    return {"action": "requeue", "reason": reason, "after": after}


# -- refs: the owner readers -----------------------------------------------------------------


def test_owner_lookups() -> None:
    tc, machine, pool = captf(), captf(MACHINE, "m1"), captf(POOL, "p1")
    assert owner_of(tc) == ObjectRef(CAPI_CLUSTER, "c1")
    assert owner_of(machine) == ObjectRef(CAPI_MACHINE, "m1")
    assert owner_of(pool) == ObjectRef("MachinePool", "p1")
    assert owner_of(captf(MACHINE, "m1", owner=None)) is None
    # Only Cluster API's group counts, and the controller owner comes first.
    other = captf(MACHINE, "m1", owner=None)
    other["metadata"]["ownerReferences"] = [
        {"apiVersion": "example.io/v1", "kind": "Machine", "name": "x"},
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "a"},
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Machine",
            "name": "b",
            "controller": True,
        },
    ]
    assert owner_of(other) == ObjectRef(CAPI_MACHINE, "b")
    assert cluster_name_of(tc) == "c1"  # a TerraformCluster's: its owner
    assert cluster_name_of(captf(MACHINE, "m1", cluster="prod")) == "prod"  # a member's: label
    assert cluster_name_of(captf(MACHINE, "m1", cluster=None)) == ""


def test_a_member_finds_its_terraform_cluster_through_the_cluster() -> None:
    member = captf(MACHINE, "m1", cluster="prod")
    related: dict[tuple[str, str], Json] = {
        ObjectRef(CAPI_CLUSTER, "prod"): capi_cluster("prod", infra="tf-prod")
    }
    assert cluster_of(member, related) == "tf-prod"
    assert cluster_of(member, {}) == ""
    assert cluster_of(captf(name="tf-prod"), {}) == "tf-prod"
    assert terraform_cluster_of(capi_cluster(infra_kind="DockerCluster")) == ""
    assert terraform_cluster_of(capi_cluster(infra=None)) == ""


def test_bootstrap_secret_names() -> None:
    assert bootstrap_secret_of(capi_machine("m1")) == "m1-bootstrap"
    assert bootstrap_secret_of(capi_pool("p1", bootstrap="data")) == "data"
    assert bootstrap_secret_of(capi_machine("m1", bootstrap=None)) == ""
    assert bootstrap_secret_of(None) == ""


# -- the owner waits -------------------------------------------------------------------------

WAITS: list[tuple[str, Json, list[Json], Json]] = [
    ("a cluster without owner", captf(owner=None), base_objects(), _requeue("WaitingForOwner")),
    (
        "a cluster whose owner is not found",
        captf(),
        [o for o in base_objects() if o["kind"] != CAPI_CLUSTER],
        _requeue("WaitingForOwner"),
    ),
    (
        "a cluster whose Cluster names another",
        captf(),
        [capi_cluster(infra="other"), *base_objects()[1:]],
        _requeue("OwnerRefMismatch"),
    ),
    (
        "a machine without owner",
        captf(MACHINE, "m1", owner=None),
        _member_world(),
        _requeue("WaitingForOwner"),
    ),
    (
        "a machine whose Machine is not found",
        captf(MACHINE, "m1"),
        _member_world(owner=None),
        _requeue("WaitingForOwner"),
    ),
    (
        "a machine whose Machine names another",
        captf(MACHINE, "m1"),
        _member_world(owner=capi_machine("m1", infra="m2")),
        _requeue("OwnerRefMismatch"),
    ),
    (
        "a pool whose MachinePool names another",
        captf(POOL, "m1"),
        _member_world(POOL, owner=capi_pool("m1", infra="m2")),
        _requeue("OwnerRefMismatch"),
    ),
    (
        "a machine without the cluster-name label",
        captf(MACHINE, "m1", cluster=None),
        _member_world(),
        _requeue("WaitingForOwner"),
    ),
    (
        "a machine whose Cluster is not found",
        captf(MACHINE, "m1"),
        _member_world(cluster=None),
        _requeue("WaitingForOwner"),
    ),
    (
        "a machine whose Cluster's infrastructure is not a TerraformCluster",
        captf(MACHINE, "m1"),
        _member_world(cluster=capi_cluster(infra_kind="DockerCluster")),
        _requeue("ClusterNotTerraform"),
    ),
    (
        "a machine whose Cluster names no infrastructure",
        captf(MACHINE, "m1"),
        _member_world(cluster=capi_cluster(infra=None)),
        _requeue("ClusterNotTerraform"),
    ),
    (
        "a machine whose Cluster's infrastructure is not provisioned",
        captf(MACHINE, "m1"),
        _member_world(cluster=capi_cluster(provisioned=False)),
        _requeue("WaitingForClusterInfrastructure"),
    ),
    (
        "a machine without dataSecretName",
        captf(MACHINE, "m1"),
        _member_world(owner=capi_machine("m1", bootstrap=None)),
        _requeue("WaitingForBootstrapData"),
    ),
    (
        "a pool whose dataSecretName is empty",
        captf(POOL, "m1"),
        _member_world(POOL, owner=capi_pool("m1", bootstrap=None)),
        _requeue("WaitingForBootstrapData"),
    ),
    (
        "a machine whose bootstrap Secret is missing",
        captf(MACHINE, "m1"),
        _member_world(bootstrap=None),
        _requeue("WaitingForBootstrapData"),
    ),
    (
        "a bootstrap Secret without value",
        captf(MACHINE, "m1"),
        _member_world(bootstrap=bootstrap_secret("m1", value=None)),
        _requeue("BootstrapDataInvalid", 600.0),
    ),
    (
        "a machine with everything: its apply",
        captf(MACHINE, "m1"),
        _member_world(),
        {"action": "run", "op": "apply", "reason": "NoState", "retry": 1},
    ),
]


@pytest.mark.parametrize(
    ("obj", "others", "expected"), [w[1:] for w in WAITS], ids=[w[0] for w in WAITS]
)
def test_owner_waits(obj: Json, others: list[Json], expected: Json) -> None:
    assert decided(obj, others) == expected


def test_the_bootstrap_message_is_clear() -> None:
    obj = captf(MACHINE, "m1")
    snap = snapshot.build(obj, _member_world(bootstrap=bootstrap_secret("m1", value=None)))
    decision = decide(snap, NOW)
    assert isinstance(decision, Requeue)
    assert decision.message == "bootstrap data Secret m1-bootstrap has no key 'value'"


def test_a_deletion_waits_for_no_owner() -> None:
    # Infrastructure whose owner went first must still be destroyable: with a state it is
    # destroyed, and without one (it never applied) its finalizer goes at once.
    obj = captf(MACHINE, "m1", owner=None, deleting=ago(1), finalizers=[FINALIZER])
    world = _member_world(owner=None, cluster=None)
    assert decided(obj, world)["reason"] == "DeletingWithoutState"
    applied = [*world, state("m1", serial=1, inputs=current_hash())]
    assert decided(obj, applied) | {"retry": 1} == {
        "action": "run",
        "op": "destroy",
        "reason": "Deleting",
        "retry": 1,
    }


def test_the_new_steps_sit_between_the_running_job_and_the_ops() -> None:
    names = [step.__name__ for step in STEPS]
    # Cluster API's rules first (a move never destroys, pause before deletion), the
    # deletion rules (docs/deletion.md), then whom the object acts for, then the ops.
    assert names[:5] == ["cache_behind", "running", "moved", "paused", "externally_managed"]
    assert names.index("deletion_blocked") < names.index("retain") < names.index("destroy")
    owner_steps = ["owner_waits", "member_cluster", "cluster_infrastructure", "bootstrap_data"]
    first = names.index("owner_waits")
    assert names[first : first + 4] == owner_steps
    assert names.index("retained_state") < first < names.index("not_ready")


# -- pause, move, external management --------------------------------------------------------


def _paused_cluster() -> list[Json]:
    return [capi_cluster(paused=True), *base_objects()[1:]]


PAUSES: list[tuple[str, Json, list[Json]]] = [
    ("the Cluster's spec.paused", captf(spec=NEW_VARS), _paused_cluster()),
    ("the paused annotation", captf(spec=NEW_VARS, annotations={ANN_PAUSED: ""}), base_objects()),
    (
        "a member of a paused Cluster",
        captf(MACHINE, "m1"),
        _member_world(cluster=capi_cluster(paused=True)),
    ),
    (
        "a paused deletion: no destroy",
        captf(deleting=ago(1), finalizers=[FINALIZER]),
        _paused_cluster(),
    ),
]


@pytest.mark.parametrize(("obj", "others"), [p[1:] for p in PAUSES], ids=[p[0] for p in PAUSES])
def test_pause_starts_no_job(obj: Json, others: list[Json]) -> None:
    assert decided(obj, others) == _requeue("Paused", 600.0)
    done = plan_pass(snapshot.build(obj, others), NOW)
    assert done.launch is None
    assert not done.remove_finalizer
    assert done.status is not None
    assert done.status["next"]["reason"] == "Paused"
    [paused] = [c for c in done.status["conditions"] if c["type"] == "Paused"]
    assert (paused["status"], paused["reason"]) == ("True", "Paused")


# Issue 26, item 9: status.next said JobRunning, not Paused, while a Job that was running
# when the pause came finished.
@pytest.mark.parametrize(("obj", "others"), [p[1:] for p in PAUSES], ids=[p[0] for p in PAUSES])
def test_a_pause_that_comes_while_a_job_runs_is_what_next_names(
    obj: Json, others: list[Json]
) -> None:
    name = obj["metadata"]["name"]
    busy = job("apply", 1, None, owner=name, kind=obj["kind"], state="Running")
    tracked = obj | {"status": obj["status"] | {"activeJob": busy["metadata"]["name"]}}
    done = plan_pass(snapshot.build(tracked, [*others, busy]), NOW)
    assert isinstance(done.decision, Requeue)
    assert (done.decision.reason, done.decision.after) == ("Paused", 60.0)
    assert f"Job {busy['metadata']['name']}, started before the pause" in done.decision.message
    assert done.launch is None
    assert not done.remove_finalizer
    assert done.requeue == 60.0  # the running Job is awaited as often as before
    assert done.status is not None
    assert done.status["next"]["reason"] == "Paused"
    assert done.status.get("activeJob", busy["metadata"]["name"]) == busy["metadata"]["name"]
    [waiting] = [c for c in done.status["conditions"] if c["type"] == "Waiting"]
    assert waiting["reason"] == "Paused"
    # Once the Job finished: accounted, no longer active, still Paused.
    finished = job("apply", 1, "succeeded", owner=name, kind=obj["kind"], finished=ago(seconds=1))
    after = plan_pass(snapshot.build(tracked, [*others, finished]), NOW)
    assert [a.job for a in after.accounts] == [finished["metadata"]["name"]]
    assert isinstance(after.decision, Requeue)
    assert after.decision.reason == "Paused"
    assert after.status is not None
    assert after.status["activeJob"] is None  # the merge patch removes it


def test_a_running_job_that_is_not_paused_is_still_job_running() -> None:
    busy = job("apply", 1, None, state="Running")
    assert decided(captf(), [*base_objects(), busy]) == _requeue("JobRunning", 60.0)


def test_a_paused_object_still_accounts_its_finished_jobs() -> None:
    failed = job("apply", 1, "failed", finished=ago(1))
    done = plan_pass(snapshot.build(captf(spec=NEW_VARS), [*_paused_cluster(), failed]), NOW)
    assert [a.job for a in done.accounts] == ["c1-apply-00000001"]
    assert done.decision.reason == "Paused"


def test_the_paused_condition_turns_false_once_resumed() -> None:
    was = captf(status={"conditions": [{"type": "Paused", "status": "True", "reason": "Paused"}]})
    done = plan_pass(snapshot.build(was, base_objects()), NOW)
    assert done.status is not None
    [paused] = [c for c in done.status["conditions"] if c["type"] == "Paused"]
    assert (paused["status"], paused["reason"]) == ("False", "NotPaused")
    never = plan_pass(snapshot.build(captf(), base_objects()), NOW).status or {}
    assert all(c["type"] != "Paused" for c in never.get("conditions", []))


def test_a_deletion_for_move_is_never_a_destroy() -> None:
    notes = {ANN_DELETE_FOR_MOVE: ""}
    obj = captf(annotations=notes, deleting=ago(1), finalizers=[FINALIZER])
    # Move pauses the Cluster first; the finalizer still comes off, without a Job.
    for others in (base_objects(), _paused_cluster()):
        done = plan_pass(snapshot.build(obj, others), NOW)
        assert done.decision.reason == "Moved"
        assert done.launch is None
        assert done.remove_finalizer


def test_delete_for_move_on_a_live_object_changes_nothing() -> None:
    obj = captf(spec=NEW_VARS, annotations={ANN_DELETE_FOR_MOVE: ""})
    assert decided(obj, base_objects())["reason"] == "InputsChanged"


def test_externally_managed_infrastructure_is_left_alone() -> None:
    notes = {ANN_EXTERNALLY_MANAGED: "someone"}
    live = plan_pass(snapshot.build(captf(spec=NEW_VARS, annotations=notes), base_objects()), NOW)
    assert live.decision.reason == "ExternallyManaged"
    assert live.launch is None
    assert not live.remove_finalizer
    deleted = captf(annotations=notes, deleting=ago(1), finalizers=[FINALIZER])
    gone = plan_pass(snapshot.build(deleted, base_objects()), NOW)
    assert gone.launch is None
    assert gone.remove_finalizer


# -- deletion in Cluster API's order ---------------------------------------------------------


def test_a_deleting_cluster_waits_for_its_machines_and_pools() -> None:
    obj = captf(deleting=ago(1), finalizers=[FINALIZER])
    members = [captf(MACHINE, "m1"), captf(MACHINE, "m2"), captf(POOL, "p1")]
    elsewhere = captf(MACHINE, "m9", cluster="other")
    snap = snapshot.build(obj, [*base_objects(), *members, elsewhere])
    decision = decide(snap, NOW)
    assert isinstance(decision, Requeue)
    assert decision.reason == "DeletionBlocked"
    assert "2 TerraformMachine, 1 TerraformMachinePool remain" in decision.message
    alone = decide(snapshot.build(obj, [*base_objects(), elsewhere]), NOW)
    assert (alone.reason, getattr(alone, "op", None)) == ("Deleting", "destroy")


# Issue 26, item 3: Retain answered Retained while members remained. The members inherit
# the cluster's Retain, and one whose cluster is gone is deleted as Delete.
@pytest.mark.parametrize(
    ("policy", "members", "reason"),
    [
        ("Delete", [captf(MACHINE, "m1")], "DeletionBlocked"),
        ("Retain", [captf(MACHINE, "m1")], "DeletionBlocked"),
        ("Retain", [captf(POOL, "p1")], "DeletionBlocked"),
        ("Retain", [captf(MACHINE, "m1", spec={"deletionPolicy": "Delete"})], "DeletionBlocked"),
        ("Retain", [], "Retained"),
        ("Retain", [captf(MACHINE, "m9", cluster="other")], "Retained"),
        ("Delete", [], "Deleting"),
    ],
)
def test_a_deleting_cluster_waits_for_its_members_whatever_its_policy(
    policy: str, members: list[Json], reason: str
) -> None:
    obj = captf(spec={"deletionPolicy": policy}, deleting=ago(1), finalizers=[FINALIZER])
    assert decided(obj, [*base_objects(), *members])["reason"] == reason


def test_a_retained_cluster_without_its_finalizer_does_not_wait() -> None:
    obj = captf(spec={"deletionPolicy": "Retain"}, deleting=ago(1), finalizers=[])
    assert decided(obj, [*base_objects(), captf(MACHINE, "m1")]) == {
        "action": "idle",
        "reason": "Deleting",
    }


# -- block-move ------------------------------------------------------------------------------


def test_block_move_is_set_while_a_job_runs_and_removed_after() -> None:
    starting = plan_pass(snapshot.build(captf(spec=NEW_VARS), base_objects()), NOW)
    assert starting.launch is not None
    assert starting.metadata == {"annotations": {ANN_BLOCK_MOVE: "true"}}
    running = captf(spec=NEW_VARS, annotations={ANN_BLOCK_MOVE: "true"})
    busy = job("apply", 1, None, state="Running")
    assert plan_pass(snapshot.build(running, [*base_objects(), busy]), NOW).metadata is None
    finished = job("apply", 1, "succeeded", finished=ago(0.5))
    idle = captf(annotations={ANN_BLOCK_MOVE: "true"})
    done = plan_pass(snapshot.build(idle, [*base_objects(), finished]), NOW)
    assert done.metadata == {"annotations": {ANN_BLOCK_MOVE: None}}


def test_owners_of_builds_what_a_member_needs() -> None:
    pool = captf(POOL, "p1")
    kinds = sorted(o["kind"] for o in owners_of(pool))
    assert kinds == ["Cluster", "MachinePool", "Secret"]
    world = [module_configmap("p1"), secret("creds", {"t": "x"}), captf(name="c1", ready=True)]
    assert decided(pool, [*world, *owners_of(pool)])["action"] == "run"
    assert decided(pool, world)["reason"] == "WaitingForOwner"
