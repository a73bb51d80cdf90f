"""The deletion rules of DecideOp (docs/deletion.md): each rule, its message, and the
writes and Events the plan makes of it."""

from __future__ import annotations

import pytest

from controller.core.basics.names import (
    ANN_ABANDON,
    ANN_APPLIED,
    ANN_RESTORE_SERIAL,
    ANN_SERIAL,
    CLUSTER,
    FINALIZER,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_RETAINED_FROM,
    LABEL_RETAINED_UID,
    POOL,
    state_secret_name,
)
from controller.core.decide import deletion, snapshot
from controller.core.decide.context import Context, context_of
from controller.core.decide.decision import Idle, Requeue, Run, to_json
from controller.core.decide.steps import decide
from controller.core.plan import planner
from controller.core.plan.accounting import accounting_of
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    NS,
    ago,
    base_objects,
    captf,
    current_hash,
    decided,
    job,
    labelled,
    secret,
    state,
)

UID = "uid-c1"


STATE = state_secret_name(NS, CLUSTER, "c1")


def _deleting(**kwargs: object) -> Json:
    return captf(deleting=ago(minutes=1), finalizers=[FINALIZER], **kwargs)  # type: ignore[arg-type]


def _inputs(applied: bool = True, name: str = "c1-inputs-0123abcd") -> Json:
    notes = {ANN_APPLIED: "true"} if applied else {}
    return labelled(secret(name, {"variables.json": "{}"}, **notes))


def _backup(serial: int) -> Json:
    out = secret(f"{STATE}-{serial}", {"terraform.tfstate": "{}"})
    out["metadata"]["labels"] = {LABEL_BACKUP_OF: "c1", LABEL_KIND: CLUSTER, LABEL_NAME: "c1"}
    out["metadata"]["annotations"] = {ANN_SERIAL: str(serial)}
    return out


def _without_state(*extra: Json) -> list[Json]:
    return [*base_objects(applied=False), *extra]


def _verbose(obj: Json, others: list[Json]) -> Json:
    return to_json(decide(snapshot.build(obj, others), NOW), verbose=True)


# --- Held: lost or unreadable state ---------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "status", "shown"),
    [
        ([_inputs()], {}, f"is marked {ANN_APPLIED}"),
        ([_backup(3)], {}, "1 state backup(s) exist"),
        ([job("apply", 1, "succeeded", result={"stateSerial": 2})], {}, "left state serial 2"),
        ([], {"stateSerial": 4}, "status.stateSerial is 4"),
    ],
)
def test_a_lost_state_after_an_apply_holds_the_deletion(
    extra: list[Json], status: Json, shown: str
) -> None:
    out = _verbose(_deleting(status=status), _without_state(*extra))
    assert (out["action"], out["reason"], out["after"]) == ("requeue", "DeletionHeld", 60.0)
    assert f"state Secret {STATE} is gone" in out["message"]
    assert shown in out["message"]
    assert f"{ANN_ABANDON}={UID}" in out["message"]


def test_the_hold_names_the_newest_backup_to_restore() -> None:
    out = _verbose(_deleting(), _without_state(_backup(2), _backup(5), _backup(3)))
    assert f"annotate {ANN_RESTORE_SERIAL}=5, the newest" in out["message"]
    bare = _verbose(_deleting(), _without_state(_inputs()))
    assert "no state backup exists to restore" in bare["message"]


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        (state(serial="x", inputs="h"), "has no integer captf.io/serial"),
        (state(serial=None), "has no integer captf.io/serial"),
        ({**state(inputs="h"), "data": {"other": "e30="}}, "has no terraform.tfstate key"),
        ({**state(inputs="h"), "data": {}}, "has no terraform.tfstate key"),
    ],
)
def test_an_unreadable_state_holds_the_deletion_even_without_an_apply(
    broken: Json, why: str
) -> None:
    out = _verbose(_deleting(), [*base_objects(applied=False), broken])
    assert out["reason"] == "DeletionHeld"
    assert why in out["message"]


def test_the_state_keys_the_cache_keeps_are_read_like_data() -> None:
    kept = state(inputs="h")
    kept.pop("data")
    kept["dataKeys"] = ["other"]
    assert decided(_deleting(), [*base_objects(applied=False), kept])["reason"] == "DeletionHeld"
    kept["dataKeys"] = ["terraform.tfstate"]
    assert decided(_deleting(), [*base_objects(applied=False), kept])["op"] == "destroy"
    # A state laid out across Secrets: its manifest is the state's key.
    kept["dataKeys"] = ["manifest.json", "outputs.json"]
    assert decided(_deleting(), [*base_objects(applied=False), kept])["op"] == "destroy"


def test_a_wrong_abandon_value_is_named_in_the_hold() -> None:
    obj = _deleting(annotations={ANN_ABANDON: "someone-else"})
    out = _verbose(obj, _without_state(_inputs()))
    assert out["reason"] == "DeletionHeld"
    assert "captf.io/abandon='someone-else' is not this object's uid" in out["message"]


# --- What ends a hold -----------------------------------------------------------------


def test_a_restore_runs_on_a_held_deletion_and_the_destroy_follows() -> None:
    obj = _deleting(annotations={ANN_RESTORE_SERIAL: "3"})
    out = decided(obj, _without_state(_backup(3)))
    assert (out["op"], out["reason"]) == ("restore", "RestoreRequested")
    # The restore wrote the state back: the destroy runs.
    restored = _deleting(annotations={ANN_RESTORE_SERIAL: "3"}, status={"lastRestoredSerial": 3})
    out = decided(restored, [*base_objects(), _backup(3)])
    assert (out["op"], out["reason"]) == ("destroy", "Deleting")


def test_a_restore_is_ignored_on_a_deletion_whose_state_reads() -> None:
    obj = _deleting(annotations={ANN_RESTORE_SERIAL: "3"})
    out = decided(obj, [*base_objects(), _backup(3)])
    assert (out["op"], out["reason"]) == ("destroy", "Deleting")


def test_an_abandon_by_uid_releases_a_held_deletion() -> None:
    obj = _deleting(annotations={ANN_ABANDON: UID, ANN_RESTORE_SERIAL: "3"})
    decision = decide(snapshot.build(obj, _without_state(_inputs(), _backup(3))), NOW)
    assert isinstance(decision, Idle)
    assert decision.reason == "Abandoned"
    assert "keeps running, untracked" in decision.message
    done = planner.plan_pass(snapshot.build(obj, _without_state(_inputs(), _backup(3))), NOW)
    assert done.remove_finalizer
    assert done.launch is None
    [warning] = [e for e in done.events if e.reason == "AbandonedInfrastructure"]
    assert warning.type == "Warning"
    assert "untracked" in warning.message


def test_an_abandon_releases_a_failing_destroy_but_not_one_that_may_succeed() -> None:
    obj = _deleting(annotations={ANN_ABANDON: UID})
    failed = job("destroy", 1, "failed", finished=ago(minutes=2))
    assert decided(obj, [*base_objects(), failed])["reason"] == "Abandoned"
    assert decided(obj, base_objects())["op"] == "destroy"


def test_a_failing_destroy_backs_off_forever_and_names_the_abandon() -> None:
    failures = [job("destroy", i, "failed", finished=ago(minutes=10 - i)) for i in range(1, 9)]
    out = _verbose(_deleting(), [*base_objects(), *failures])
    assert (out["reason"], out["op"]) == ("DeletingBackoff", "destroy")
    assert out["after"] == 600.0 - 120.0  # at the cap: 10 min after the newest failure
    assert f"annotate {ANN_ABANDON}={UID}" in out["message"]


# --- Nothing to destroy, Retain ------------------------------------------------------


def test_an_object_that_never_applied_drops_its_finalizer_at_once() -> None:
    decision = decide(snapshot.build(_deleting(), _without_state(_inputs(applied=False))), NOW)
    assert isinstance(decision, Idle)
    assert decision.reason == "DeletingWithoutState"
    done = planner.plan_pass(snapshot.build(_deleting(), _without_state()), NOW)
    assert done.remove_finalizer
    assert done.launch is None


def test_retain_keeps_and_labels_the_state_backups_and_inputs() -> None:
    obj = _deleting(spec={"deletionPolicy": "Retain"})
    inputs = _inputs()
    inputs["metadata"]["ownerReferences"] = [{"kind": "TerraformCluster", "name": "c1"}]
    snap = snapshot.build(obj, [*base_objects(), _backup(1), inputs])
    done = planner.plan_pass(snap, NOW)
    assert isinstance(done.decision, Idle)
    assert done.decision.reason == "Retained"
    assert done.remove_finalizer
    assert done.launch is None
    patches = {p.name: p.patch["metadata"] for p in done.secret_patches}
    marks = {LABEL_RETAINED_FROM: "TerraformCluster.c1", LABEL_RETAINED_UID: UID}
    assert patches == {
        STATE: {"labels": marks},
        f"{STATE}-1": {"labels": marks},
        "c1-inputs-0123abcd": {"labels": marks, "ownerReferences": None},
    }
    assert [e.reason for e in done.events] == ["InfrastructureRetained"]


def test_retain_releases_a_held_deletion_too() -> None:
    obj = _deleting(spec={"deletionPolicy": "Retain"})
    assert decided(obj, _without_state(_inputs()))["reason"] == "Retained"


@pytest.mark.parametrize(("cluster_policy", "reason"), [("Retain", "Retained"), (None, None)])
def test_a_member_takes_its_clusters_deletion_policy(
    cluster_policy: str | None, reason: str | None
) -> None:
    cluster = captf(spec={"deletionPolicy": cluster_policy} if cluster_policy else {})
    pool = captf(POOL, "p1", deleting=ago(minutes=1), finalizers=[FINALIZER])
    others = [*base_objects("p1"), cluster]
    out = decided(pool, others)
    assert out.get("reason") == reason or out.get("op") == "destroy"
    own = captf(POOL, "p1", spec={"deletionPolicy": "Delete"}, deleting=ago(minutes=1))
    own["metadata"]["finalizers"] = [FINALIZER]
    assert decided(own, others)["op"] == "destroy"


# --- Retained state found by a new object --------------------------------------------


def _retained(kind_name: str = "TerraformCluster.c1", uid: str = "old-uid") -> Json:
    kept = state(inputs=current_hash())
    kept["metadata"]["labels"] |= {LABEL_RETAINED_FROM: kind_name, LABEL_RETAINED_UID: uid}
    return kept


def test_a_new_object_waits_on_a_retained_state_until_it_adopts_it() -> None:
    others = [*base_objects(applied=False), _retained()]
    out = _verbose(captf(spec={"variables": {"size": 4}}), others)
    assert (out["reason"], out["after"]) == ("RetainedStateFound", 600.0)
    assert "spec.adoptRetainedState: true" in out["message"]
    assert f"{LABEL_RETAINED_UID}=old-uid" in out["message"]
    adopting = captf(spec={"variables": {"size": 4}, "adoptRetainedState": True})
    assert decided(adopting, others)["reason"] == "InputsChanged"
    done = planner.plan_pass(snapshot.build(adopting, others), NOW)
    [patch] = done.secret_patches
    labels = {LABEL_RETAINED_FROM: None, LABEL_RETAINED_UID: None}
    assert (patch.name, patch.patch) == (STATE, {"metadata": {"labels": labels}})
    assert "RetainedStateAdopted" in [e.reason for e in done.events]


def test_a_new_object_deleted_before_adopting_leaves_the_retained_state_alone() -> None:
    obj = _deleting(spec={"deletionPolicy": "Retain"})
    done = planner.plan_pass(snapshot.build(obj, [*base_objects(applied=False), _retained()]), NOW)
    assert isinstance(done.decision, Idle)
    assert done.decision.reason == "DeletingWithoutState"
    assert "retained from TerraformCluster.c1 uid old-uid" in done.decision.message
    assert done.secret_patches == ()
    assert done.remove_finalizer


def test_an_objects_own_retained_labels_are_its_own() -> None:
    mine = _retained(uid=UID)
    assert decided(captf(), [*base_objects(applied=False), mine]) == {"action": "idle"}


# --- The marker ----------------------------------------------------------------------


def test_accounting_a_job_that_left_a_state_marks_its_inputs_secret() -> None:
    applied = job("apply", 1, "succeeded", result={"stateSerial": 1})
    applied["spec"] = {
        "template": {
            "spec": {
                "containers": [{"env": [{"name": "CAPTF_INPUTS_SECRET", "value": "c1-inputs-x"}]}]
            }
        }
    }
    snap = snapshot.build(captf(), [*base_objects(), applied, _inputs(False, "c1-inputs-x")])
    [record] = list(snap.history)
    assert accounting_of(snap, snap.history, record).mark_applied == ("c1-inputs-x",)
    marked = snapshot.build(captf(), [*base_objects(), applied, _inputs(True, "c1-inputs-x")])
    [record] = list(marked.history)
    assert accounting_of(marked, marked.history, record).mark_applied == ()
    destroyed = job("destroy", 1, "succeeded", result={"stateSerial": 2})
    destroyed["spec"] = applied["spec"]
    snap = snapshot.build(captf(), [*base_objects(), destroyed, _inputs(False, "c1-inputs-x")])
    [record] = list(snap.history)
    assert accounting_of(snap, snap.history, record).mark_applied == ()


def test_the_destroyed_and_released_reasons_let_the_object_go() -> None:
    done = job("destroy", 1, "succeeded", finished=ago(minutes=1))
    decision = decide(snapshot.build(_deleting(), [*base_objects(), done]), NOW)
    assert isinstance(decision, Idle)
    assert decision.reason == "Destroyed"
    running = decide(
        snapshot.build(_deleting(), [*base_objects(), job("destroy", 2, None, state="Running")]),
        NOW,
    )
    assert isinstance(running, Requeue)
    assert running.reason == "JobRunning"
    assert isinstance(decide(snapshot.build(_deleting(), base_objects()), NOW), Run)


def test_a_cached_state_with_its_contract_outputs_is_read_by_its_key_list() -> None:
    """The cache keeps a state's key list and, of its data, only outputs.json: the state is
    readable when the list names terraform.tfstate, whatever the kept data holds."""
    cached = state("c1", serial=1, inputs=current_hash())
    cached["data"] = {"outputs.json": "e30="}
    cached["dataKeys"] = ["outputs.json", "terraform.tfstate"]
    ctx = context_of(snapshot.build(captf(), [*base_objects(applied=False), cached]), NOW)
    assert isinstance(ctx, Context)
    assert deletion.unreadable(ctx) is None
    cached["dataKeys"] = ["outputs.json"]
    ctx = context_of(snapshot.build(captf(), [*base_objects(applied=False), cached]), NOW)
    assert isinstance(ctx, Context)
    assert deletion.unreadable(ctx) is not None


def test_a_state_whose_part_is_missing_holds_the_deletion() -> None:
    kept = state(inputs="h")
    kept["metadata"]["annotations"]["captf.io/state-parts"] = "0123456789abcdef:2"
    kept["data"] = {"manifest.json": "e30="}
    parts = [secret(f"{STATE}-part-0123456789abcdef-{i}", {}, **{}) for i in range(2)]
    whole = [*base_objects(applied=False), kept, *parts]
    assert decided(_deleting(), whole)["op"] == "destroy"
    out = _verbose(_deleting(), [*base_objects(applied=False), kept, parts[0]])
    assert out["reason"] == "DeletionHeld"
    assert f"names part {STATE}-part-0123456789abcdef-1, which is missing" in out["message"]
