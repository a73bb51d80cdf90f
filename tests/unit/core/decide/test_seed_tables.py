"""The seed's "What does not back off" table, checked against every DecideOp case.

Each wait ends the pass with a requeue of a fixed interval (no failure counted);
every row of the table must be exercised by at least one case in test_decide."""

from __future__ import annotations

from typing import Any

from tests.builders import decided
from tests.unit.core.decide.test_decide import CASES

# reason -> requeue seconds, from the table.
WAITS = {
    "WaitingForRunLease": 30.0,
    "WaitingForClusterOperation": 30.0,
    "WaitingForMachineOperations": 30.0,
    "CredentialsNotReady": 30.0,
    "DependenciesNotReady": 30.0,
    "OwnerNotReady": 30.0,
    "StateUnreadable": 60.0,
    "StateLost": 60.0,
    "JobRunning": 60.0,
    "JobCacheBehind": 5.0,
    "WaitingForApproval": 600.0,
    "JobPolicyInvalid": 600.0,
    "InputsTooLarge": 600.0,
    "DurableInputsMissing": 600.0,
}


def _waits() -> list[dict[str, Any]]:
    out = []
    for _, obj, others, _expected in CASES:
        decision = decided(obj, others)
        if decision["action"] == "requeue" and decision["reason"] in WAITS:
            out.append(decision)
    return out


def test_every_wait_of_the_table_is_exercised() -> None:
    assert {d["reason"] for d in _waits()} == set(WAITS)


def test_each_wait_requeues_after_its_interval_and_names_no_op() -> None:
    for decision in _waits():
        assert decision["after"] == WAITS[decision["reason"]], decision
        assert "op" not in decision, decision
