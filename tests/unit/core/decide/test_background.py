"""Background Jobs in their budget, as DecideOp decides it (issue 39,
controller/core/decide/background.py): a drift check or refresh waits
`WaitingForBackgroundBudget` while background Jobs hold their share of the run slots,
while only the last free slot is left (it is a change's), or while its credentials'
budget a minute is spent; a change never waits there. The launch writes the class on
its run slot and a background start on the credentials' budget Lease."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest

from controller.core import plan_pass
from controller.core.basics.names import (
    ANN_BACKGROUND_STARTS,
    ANN_BACKGROUND_STRETCH,
    ANN_HOLDER_CLASS,
    LABEL_SCOPE,
    SCOPE_BUDGET,
)
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.settings import Settings
from controller.core.decide.steps import decide
from controller.core.decide.triggers import jitter
from controller.core.leases.budget import priority_delay
from controller.core.leases.budget_lease import budget_lease_name
from controller.core.leases.writes import Role
from runtime.jsonobj import Json
from tests.builders import NOW, NS, ago, base_objects, captf, job, ts

HOME = "captf-system"
SETTINGS = Settings(max_concurrent_runs=4, slot_namespace=HOME)
KEY = "secret default/creds"


def slot(i: int, holder: str | None, kind: str | None = None) -> Json:
    notes = {"captf.io/holder-namespace": NS, "captf.io/holder-cluster": "other"}
    if kind:
        notes[ANN_HOLDER_CLASS] = kind
    meta = {"name": f"captf-run-slot-{i}", "namespace": HOME, "annotations": notes}
    spec = {"holderIdentity": holder} if holder else {}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def budget(starts: list[float], stretch: str | None = None) -> Json:
    """The credentials' budget Lease with starts `seconds` before NOW."""
    recorded = {f"x{i}-drift-1": ts(NOW - timedelta(seconds=s)) for i, s in enumerate(starts)}
    notes = {ANN_BACKGROUND_STARTS: orjson.dumps(recorded).decode()}
    if stretch:
        notes[ANN_BACKGROUND_STRETCH] = stretch
    meta = {
        "name": budget_lease_name(KEY),
        "namespace": HOME,
        "labels": {LABEL_SCOPE: SCOPE_BUDGET},
        "annotations": notes,
    }
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {}}


def _drift_due() -> tuple[Json, list[Json]]:
    """A cluster whose hourly drift check came due 10 minutes ago."""
    obj = captf(spec={"drift": {"interval": "1h"}})
    others = [*base_objects(), job("drift", 1, "succeeded", finished=ago(80), result={})]
    return obj, others


def _new() -> tuple[Json, list[Json]]:
    """A cluster never applied: its apply (a change) is due."""
    return captf(), base_objects(applied=False)


def _decided(
    made: tuple[Json, list[Json]], leases: list[Json], settings: Settings = SETTINGS
) -> Json:
    obj, others = made
    return to_json(decide(snapshot.build(obj, [*others, *leases]), NOW, settings), verbose=True)


FREE = [slot(i, None) for i in range(4)]


@pytest.mark.parametrize(
    ("made", "leases", "reason"),
    [
        # Two of four slots are background's share: a third waits, a change does not.
        (
            _drift_due,
            [slot(0, "a-drift-1", "background"), slot(1, "b-refresh-1", "background"), *FREE[2:]],
            "WaitingForBackgroundBudget",
        ),
        (
            _new,
            [slot(0, "a-drift-1", "background"), slot(1, "b-refresh-1", "background"), *FREE[2:]],
            None,
        ),
        # Three held by changes: the last free slot is kept for a change.
        (
            _drift_due,
            [slot(i, f"x{i}-apply-1", "change") for i in range(3)] + FREE[3:],
            "WaitingForBackgroundBudget",
        ),
        (_new, [slot(i, f"x{i}-apply-1", "change") for i in range(3)] + FREE[3:], None),
        # A slot that says no class counts as a change's.
        (_drift_due, [slot(0, "a-drift-1"), slot(1, "b-refresh-1"), *FREE[2:]], None),
        # Every slot held: background waits for its budget, a change for a slot.
        (
            _drift_due,
            [slot(i, f"x{i}-apply-1", "change") for i in range(4)],
            "WaitingForBackgroundBudget",
        ),
        (_new, [slot(i, f"x{i}-apply-1", "change") for i in range(4)], "WaitingForRunLease"),
        (_drift_due, FREE, None),
    ],
)
def test_the_share_of_the_run_slots(made: object, leases: list[Json], reason: str | None) -> None:
    out = _decided(made(), leases)  # type: ignore[operator]
    if reason is None:
        assert out["action"] == "run"
    else:
        assert (out["action"], out["reason"]) == ("requeue", reason)
    if reason == "WaitingForBackgroundBudget":
        assert out["op"] == "drift"
        assert "changes come first" in out["message"]


def test_the_budget_a_minute_waits_for_the_window_most_overdue_first() -> None:
    settings = Settings(max_concurrent_runs=4, slot_namespace=HOME, background_jobs_per_minute=3)
    # Three starts in the last minute, the oldest 50 s ago: it leaves the window in 10 s.
    out = _decided(_drift_due(), [*FREE, budget([50, 20, 5])], settings)
    assert (out["action"], out["reason"], out["op"]) == (
        "requeue",
        "WaitingForBackgroundBudget",
        "drift",
    )
    assert "secret default/creds started 3 background Jobs in the last minute" in out["message"]
    # 10 s, then the priority delay of one that came due 20 minutes ago (plus its jitter).
    late = 20 * 60 + 10 - jitter("uid-c1", "drift", 3600)
    assert out["after"] == pytest.approx(10 + priority_delay(late), abs=0.002)
    # With one start left, it runs.
    assert _decided(_drift_due(), [*FREE, budget([50, 20])], settings)["action"] == "run"
    # A change is never held by the budget.
    assert _decided(_new(), [*FREE, budget([50, 20, 5])], settings)["action"] == "run"


def test_the_launch_writes_the_class_and_the_start() -> None:
    obj, others = _drift_due()
    todo = plan_pass(snapshot.build(obj, [*others, *FREE]), NOW, settings=SETTINGS)
    assert todo.launch is not None
    slot_claim, start, *_ = todo.launch.claims
    assert (slot_claim.role, slot_claim.holder_class) == (Role.RUN_SLOT, "background")
    assert (start.role, start.name, start.namespace) == (
        Role.BACKGROUND_BUDGET,
        budget_lease_name(KEY),
        HOME,
    )
    assert (start.budget_key, start.per_minute) == (KEY, 60)
    obj, others = _new()
    todo = plan_pass(snapshot.build(obj, [*others, *FREE]), NOW, settings=SETTINGS)
    assert todo.launch is not None
    assert todo.launch.claims[0].holder_class == "change"
    assert all(c.role != Role.BACKGROUND_BUDGET for c in todo.launch.claims)


def test_a_stretch_moves_the_schedule() -> None:
    """Stretched 2.5 times, an hourly drift check last run 80 minutes ago is not due yet;
    2.5 hours after it, it is."""
    obj, others = _drift_due()
    out = _decided((obj, others), [*FREE, budget([], stretch="2.5")])
    assert out["action"] == "idle"
    late = jitter("uid-c1", "drift", 2.5 * 3600)  # drawn over the stretched interval
    assert out["after"] == pytest.approx(150 * 60 - 80 * 60 + late, abs=0.002)
