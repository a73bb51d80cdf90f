"""The moves of a state and its backups from the names before kinds were part of them
(controller/core/plan/state_moves.py), and which Secret a snapshot reads as the state."""

from __future__ import annotations

import pytest

from controller.core.basics.names import (
    CLUSTER,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_NAME,
    MACHINE,
    POOL,
    state_secret_name,
)
from controller.core.decide import snapshot
from controller.core.plan.state_moves import Move, MoveStep, state_moves
from runtime.jsonobj import Json
from tests.builders import (
    NS,
    captf,
    job,
    state,
)

NEW = state_secret_name(NS, CLUSTER, "c1")


def _backup(serial: int, *, legacy: bool = True, kind: str = CLUSTER) -> Json:
    found = state("c1", serial=serial, kind=kind, legacy=legacy)
    found["metadata"]["name"] = f"{found['metadata']['name']}-{serial}"
    found["metadata"]["labels"][LABEL_BACKUP_OF] = "c1"
    return found


def _moves(*secrets: Json, jobs: tuple[Json, ...] = ()) -> tuple[Move, ...]:
    return state_moves(snapshot.build(captf(), [*secrets, *jobs]))


def test_names_differ_by_kind_and_namespace_but_not_by_uid() -> None:
    names = {state_secret_name(NS, kind, "c1") for kind in (CLUSTER, POOL, MACHINE)}
    assert len(names) == 3
    assert state_secret_name("other", CLUSTER, "c1") != NEW
    assert state_secret_name(NS, CLUSTER, "c1") == NEW  # no uid: a move keeps it
    assert NEW.startswith("c1-cluster-")
    assert NEW.endswith("-state")


def test_an_old_state_is_copied_then_retired_once_the_copy_is_shown() -> None:
    old = state("c1", serial=3, legacy=True)
    assert _moves(old) == (Move(MoveStep.COPY, "c1-state", NEW),)
    assert _moves(old, state("c1", serial=3)) == (Move(MoveStep.RETIRE, "c1-state", NEW),)


def test_an_old_state_behind_a_newer_one_is_kept_as_its_backup() -> None:
    old = state("c1", serial=3, legacy=True)
    newer = state("c1", serial=4)
    [move] = _moves(old, newer)
    assert move == Move(MoveStep.COPY, "c1-state", f"{NEW}-3", backup_of="c1")
    copied = _backup(3, legacy=False)
    assert _moves(old, newer, copied) == (
        Move(MoveStep.RETIRE, "c1-state", f"{NEW}-3", backup_of="c1"),
    )


def test_old_backups_move_beside_the_state() -> None:
    moves = _moves(state("c1", serial=3), _backup(2), _backup(1, legacy=False))
    assert moves == (Move(MoveStep.COPY, "c1-state-2", f"{NEW}-2", backup_of="c1"),)


def test_nothing_moves_while_a_job_runs() -> None:
    running = job("apply", 1, outcome=None, state="Running")
    assert _moves(state("c1", serial=3, legacy=True), jobs=(running,)) == ()


@pytest.mark.parametrize(
    "labels",
    [{}, {LABEL_NAME: "c1"}, {LABEL_NAME: "c1", LABEL_KIND: POOL}, {LABEL_KIND: CLUSTER}],
    ids=["none", "no kind", "another kind", "no name"],
)
def test_a_secret_without_the_objects_labels_is_neither_read_nor_moved(
    labels: dict[str, str],
) -> None:
    for legacy in (True, False):
        other = state("c1", serial=3, legacy=legacy)
        other["metadata"]["labels"] = labels
        snap = snapshot.build(captf(), [other])
        assert snap.state_secret is None
        assert state_moves(snap) == ()


def test_the_new_name_is_read_before_the_old_one() -> None:
    old, new = state("c1", serial=3, legacy=True), state("c1", serial=3)
    snap = snapshot.build(captf(), [old, new])
    assert snap.state_secret is not None
    assert snap.state_secret["metadata"]["name"] == NEW
    alone = snapshot.build(captf(), [old])
    assert alone.state_secret is not None
    assert alone.state_secret["metadata"]["name"] == "c1-state"


def test_a_pool_of_the_clusters_name_reads_only_its_own_state() -> None:
    pool = captf(POOL, "c1")
    cluster_state = state("c1", serial=7, kind=CLUSTER)
    snap = snapshot.build(pool, [cluster_state])
    assert snap.state_secret is None
    own = state("c1", serial=2, kind=POOL)
    snap = snapshot.build(pool, [cluster_state, own])
    assert snap.state_secret is own
