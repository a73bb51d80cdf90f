"""Issue 30's Events of a pool: `MembershipChanged` when the write-back gives the pool
another member set (told by counts, under a name a replayed pass computes again), and
`ReplicasWrittenBack` when the cloud's size goes to its MachinePool (issue 37: only
under the user's `replicas-managed-by`), `ReplicasClaimWithdrawn` when CAPTF's own old
claim goes."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.basics.names import POOL
from controller.core.decide.decision import Idle
from controller.core.plan import replicas, signals
from controller.core.plan.accounting import Event
from controller.core.plan.planner import Plan, plan_pass
from runtime.jsonobj import Json
from tests import capi_builders as capi
from tests.builders import NOW, ROLE_MODULE, module_configmap, secret
from tests.unit.core.plan.test_contract_writeback import BOUNDS, HEALTHY, _applied

A, B, C, D = (f"captf://cl/p1/{i}" for i in "abcd")


def _pool_snap(
    members: list[str],
    *,
    generation: int = 3,
    outputs: Json | None = None,
    annotations: dict[str, str] | None = None,
    writers: list[str] | None = None,
) -> Any:
    """The applied pool tp1 whose spec holds `members`; the state's outputs `outputs`
    (a pool of A and B by default); its MachinePool of 2 replicas carries `annotations`
    (autoscaled between 1 and 5 by default)."""
    notes = BOUNDS if annotations is None else annotations
    owner_cluster, owner = capi.cluster(), capi.machine_pool(annotations=notes, replicas=2)
    owner["metadata"]["resourceVersion"] = "41"
    if writers is not None:
        owned = [(manager, "Update") for manager in writers]
        owner["metadata"]["managedFields"] = capi.annotation_writers(ANN, owned)
    spec = {"providerIDList": members} if members else None
    tp = capi.owned(POOL, "tp1", owner=owner, spec=spec)
    tp["metadata"]["generation"] = generation
    others = [
        module_configmap("tp1", ROLE_MODULE),
        secret("creds", {"token": "t"}),
        capi.bootstrap_secret("p1-bootstrap"),
    ]
    found = outputs or _outputs([A, B])
    return _applied(capi.snap_of(tp, others, [owner_cluster, owner]), found, "tp1")


def _outputs(members: list[str]) -> Json:
    return {
        "provider_id": None,
        "provider_id_list": members,
        "replicas": len(members),
        "instances": [],
        "health": HEALTHY,
    }


def _told(todo: Plan, reason: str) -> list[Event]:
    return [e for e in todo.events if e.reason == reason]


@pytest.mark.parametrize(
    ("written", "read", "message"),
    [
        ([], [A, B], "membership changed: 2 added, 0 removed; 2 members"),
        ([A, B], [A, B, C, D], "membership changed: 2 added, 0 removed; 4 members"),
        ([A, B, C], [A, D], "membership changed: 1 added, 2 removed; 2 members"),
        ([A, B, C, D], [C], "membership changed: 0 added, 3 removed; 1 member"),
        ([A, B], [A, B], None),  # the same set: nothing written, nothing told
        ([B, A], [A, B], None),  # only reordered (the write-back sorts): no member changed
    ],
)
def test_a_pool_tells_its_membership_changes_by_counts(
    written: list[str], read: list[str], message: str | None
) -> None:
    todo = plan_pass(_pool_snap(written, outputs=_outputs(read)), NOW)
    told = _told(todo, signals.MEMBERSHIP_CHANGED)
    assert [(e.type, e.message) for e in told] == ([("Normal", message)] if message else [])
    for event in told:  # counts only: no member's id in the message
        assert not any(member in event.message for member in [A, B, C, D])
        assert len(event.name) <= 253


def test_a_replay_names_the_same_event_and_a_newer_generation_another() -> None:
    grown = _outputs([A, B, C, D])
    [first] = _told(plan_pass(_pool_snap([A, B], outputs=grown), NOW), signals.MEMBERSHIP_CHANGED)
    # A pass replayed before the spec write computes the same name: the create is refused.
    [again] = _told(plan_pass(_pool_snap([A, B], outputs=grown), NOW), signals.MEMBERSHIP_CHANGED)
    assert again == first
    # After the write (a newer generation, the set equal), nothing more is told.
    done = plan_pass(_pool_snap([A, B, C, D], generation=4, outputs=grown), NOW)
    assert _told(done, signals.MEMBERSHIP_CHANGED) == []
    # The same set reached again later (another generation) is a new transition.
    [later] = _told(
        plan_pass(_pool_snap([A, B], generation=6, outputs=grown), NOW),
        signals.MEMBERSHIP_CHANGED,
    )
    assert later.name != first.name


@pytest.mark.parametrize(
    "patch",
    [None, {}, {"spec": {}}, {"spec": {"providerID": A}}, {"spec": {"providerIDList": "x"}}],
)
def test_no_member_list_written_tells_nothing(patch: Json | None) -> None:
    snap = _pool_snap([A, B])
    told = signals.events(snap, Idle(after=None), {}, {}, patch)
    assert [e for e in told if e.reason == signals.MEMBERSHIP_CHANGED] == []


ANN = "cluster.x-k8s.io/replicas-managed-by"
MANAGED = {ANN: "cloud"}


@pytest.mark.parametrize(
    ("annotations", "observed", "told"),
    [
        (BOUNDS | MANAGED, 4, True),  # the cloud sizes it: the new size written
        (BOUNDS | MANAGED, 2, False),  # already so: nothing written
        (BOUNDS, 4, False),  # the autoscaler's annotations alone: spec.replicas is the size
        ({}, 4, False),  # no autoscaling: the replicas are the user's
        (BOUNDS | {ANN: "false"}, 4, False),  # Cluster API's "not managed"
    ],
)
def test_replicas_written_back_is_an_event_once_per_guarded_write(
    annotations: dict[str, str], observed: int, told: bool
) -> None:
    """The module observed `observed`; the MachinePool says 2: the guarded write and its
    Normal Event, named by the replicas and the resourceVersion the patch carries."""
    members = [A, B, C, D][:observed]
    snap = _pool_snap(members, outputs=_outputs(members), annotations=annotations)
    todo = plan_pass(snap, NOW)
    events = _told(todo, replicas.WRITTEN)
    assert bool(events) is told
    assert (todo.pool_patch is not None and todo.pool_patch.replicas is not None) is told
    for event in events:
        assert event.type == "Normal"
        assert f"{observed} replicas" in event.message
        assert event.name.endswith(f".replicas.{observed}.41")


def test_the_old_claim_withdrawn_is_an_event_once_per_guarded_write() -> None:
    """CAPTF's own `replicas-managed-by: captf` (its old write alone owns the field) goes,
    told once under the resourceVersion the patch carries; no replicas are written."""
    notes = BOUNDS | {ANN: "captf"}
    members = [A, B, C, D]
    snap = _pool_snap(members, outputs=_outputs(members), annotations=notes, writers=["Python"])
    todo = plan_pass(snap, NOW)
    assert todo.pool_patch is not None
    assert todo.pool_patch.replicas is None
    assert _told(todo, replicas.WRITTEN) == []
    [event] = _told(todo, replicas.WITHDRAWN)
    assert (event.type, event.name) == ("Normal", "tp1.claim-withdrawn.41")
    assert "spec.replicas is the size" in event.message
