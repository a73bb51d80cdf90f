"""An identity's background budget Lease (controller/core/leases/budget_lease.py): the
starts of the last minute claimed by compare-and-swap, and the stretch recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from controller.core.basics.names import (
    ANN_BACKGROUND_STARTS,
    ANN_BACKGROUND_STRETCH,
    IDENTITY,
    LABEL_SCOPE,
    SCOPE_BUDGET,
    Reason,
)
from controller.core.leases import budget_lease
from controller.core.leases.budget_lease import (
    budget_key,
    budget_lease_name,
    claim,
    free_at,
    starts_of,
    stretch_in,
    with_stretch,
)
from controller.core.leases.family import Busy
from controller.core.spec.identity import IdentityRef

T0 = datetime(2026, 12, 5, 12, tzinfo=UTC)
NS = "captf-system"
KEY = "identity aws-prod"


def _lease(starts: dict[str, float], **notes: str) -> dict[str, object]:
    recorded = {job: (T0 + timedelta(seconds=s)).isoformat() for job, s in starts.items()}
    annotations = {ANN_BACKGROUND_STARTS: orjson.dumps(recorded).decode(), **notes}
    meta = {"name": budget_lease_name(KEY), "namespace": NS, "annotations": annotations}
    return {"metadata": meta | {"resourceVersion": "7"}, "spec": {}}


@pytest.mark.parametrize(
    ("ref", "namespace", "key"),
    [
        (IdentityRef(IDENTITY, "aws-prod"), "team-a", "identity aws-prod"),
        (IdentityRef("Secret", "creds"), "team-a", "secret team-a/creds"),
        (None, "team-a", "none"),
    ],
)
def test_budget_key(ref: IdentityRef | None, namespace: str, key: str) -> None:
    assert budget_key(ref, namespace) == key


def test_lease_names_are_readable_unique_and_short() -> None:
    long = "identity " + "x" * 300
    names = {budget_lease_name(k) for k in (KEY, "identity aws_prod", long, "secret a/b")}
    assert len(names) == 4
    assert budget_lease_name(KEY).startswith("captf-budget-identity-aws-prod-")
    assert all(len(name) <= 63 for name in names)


@pytest.mark.parametrize(
    ("starts", "now", "per_minute", "waits"),
    [
        ({}, 0, 1, None),
        ({"a": 0, "b": 10}, 30, 3, None),
        ({"a": 0, "b": 10, "c": 20}, 30, 3, 60),
        ({"a": -60, "b": 10, "c": 20}, 30, 3, None),  # a left the window
        ({"a": 0, "b": 10, "c": 20}, 30, 2, 70),
    ],
)
def test_claim_and_free_at(
    starts: dict[str, float], now: float, per_minute: int, waits: float | None
) -> None:
    at = T0 + timedelta(seconds=now)
    live = _lease(starts)
    taken = claim(live, namespace=NS, key=KEY, job="new", now=at, per_minute=per_minute)
    found = free_at(live, "new", at, per_minute)
    if waits is None:
        assert found is None
        assert isinstance(taken, dict)
        kept = starts_of(taken)
        assert kept["new"] == at
        assert all((at - t).total_seconds() < 60 for t in kept.values())  # old ones pruned
        assert taken["metadata"]["labels"] == {LABEL_SCOPE: SCOPE_BUDGET}
        assert taken["metadata"]["resourceVersion"] == "7"  # the precondition
    else:
        assert found == T0 + timedelta(seconds=waits)
        assert isinstance(taken, Busy)
        assert taken.reason == Reason.WAITING_FOR_BACKGROUND_BUDGET
        assert f"{per_minute} background Jobs in the last minute" in taken.message


def test_a_replayed_claim_writes_nothing() -> None:
    live = _lease({"a": 0, "b": 1})
    assert claim(live, namespace=NS, key=KEY, job="a", now=T0, per_minute=1) is None
    assert free_at(live, "a", T0, 1) is None


def test_a_missing_lease_is_created() -> None:
    made = claim(None, namespace=NS, key=KEY, job="j", now=T0, per_minute=5)
    assert isinstance(made, dict)
    assert made["metadata"]["name"] == budget_lease_name(KEY)
    assert made["metadata"]["namespace"] == NS
    assert starts_of(made) == {"j": T0}


@pytest.mark.parametrize(
    ("note", "stretch"),
    [(None, 1.0), ("2.5", 2.5), ("0.4", 1.0), ("many", 1.0)],
)
def test_stretch_read(note: str | None, stretch: float) -> None:
    notes = {ANN_BACKGROUND_STRETCH: note} if note else {}
    assert stretch_in(_lease({}, **notes)) == stretch


def test_stretch_written_once() -> None:
    written = with_stretch(_lease({"a": 0}), namespace=NS, key=KEY, stretch=3.2)
    assert written is not None
    assert stretch_in(written) == 3.2
    assert starts_of(written) == {"a": T0}  # the starts are kept
    assert with_stretch(written, namespace=NS, key=KEY, stretch=3.2) is None


def test_unreadable_starts_read_as_none() -> None:
    broken = _lease({})
    broken["metadata"]["annotations"][ANN_BACKGROUND_STARTS] = "not json"  # type: ignore[index]
    assert starts_of(broken) == {}
    assert budget_lease.is_budget_lease({"metadata": {"labels": {LABEL_SCOPE: SCOPE_BUDGET}}})
