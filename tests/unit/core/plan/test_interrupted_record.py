"""When an interrupted-apply record ends: an apply created after it succeeded.

"After" is told by attempt sequences, never by comparing the controller's clock
with the API server's: under --time-scale, or with skew, the controller's clock
runs ahead of every creationTimestamp."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controller.core.basics.names import (
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
    ANN_SEQ,
)
from controller.core.decide.triggers import started_after_record
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    base_objects,
    captf,
    current_hash,
    decided,
    job,
    labelled,
    secret,
    ts,
)

INPUTS_SECRET = f"c1-inputs-{current_hash()[:8]}"
DELETED = "c1-apply-00000002"


def _record(**notes: str) -> Json:
    return labelled(
        secret(
            INPUTS_SECRET, {"variables.json": "{}"}, **({ANN_INTERRUPTED_APPLY: DELETED} | notes)
        )
    )


def _apply(seq: int, outcome: str, *, created: Any = None) -> Json:
    return job("apply", seq, outcome, annotations={ANN_SEQ: str(seq)}, created=created)


def _decision(record: Json, *jobs: Json) -> Json:
    return decided(captf(), [*base_objects(), record, *jobs])


# Recorded by a controller whose clock ran an hour ahead of the API server's.
AHEAD = {ANN_INTERRUPTED_APPLY_AT: ts(NOW + timedelta(hours=1))}


@pytest.mark.parametrize(
    ("name", "notes", "jobs", "due"),
    [
        ("no apply since", {ANN_INTERRUPTED_APPLY_SEQ: "2"}, [_apply(1, "succeeded")], True),
        (
            "the successor succeeded, though created 'before' a clock that ran ahead",
            AHEAD | {ANN_INTERRUPTED_APPLY_SEQ: "2"},
            [_apply(1, "succeeded"), _apply(3, "succeeded", created=ago(minutes=1))],
            False,
        ),
        (
            "the successor failed",
            {ANN_INTERRUPTED_APPLY_SEQ: "2"},
            [_apply(1, "succeeded"), _apply(3, "failed")],
            True,
        ),
        (
            "an older record without a sequence: its time still counts",
            {ANN_INTERRUPTED_APPLY_AT: ts(ago(minutes=10))},
            [_apply(3, "succeeded", created=ago(minutes=5))],
            False,
        ),
        (
            "a record with neither: only bookkeeping's removal ends it",
            {},
            [_apply(3, "succeeded")],
            True,
        ),
    ],
)
def test_the_record_ends_with_a_later_successful_apply(
    name: str, notes: dict[str, str], jobs: list[Json], due: bool
) -> None:
    decision = _decision(_record(**notes), *jobs)
    shown = (decision["action"], decision.get("op"), decision.get("reason"))
    assert shown == (("run", "apply", "InterruptedApply") if due else ("idle", None, None)), name


def test_started_after_record() -> None:
    record = {ANN_INTERRUPTED_APPLY_SEQ: "4"} | AHEAD
    assert started_after_record(_apply(4, "succeeded"), record) is True
    assert started_after_record(_apply(3, "succeeded"), record) is False
    assert started_after_record(_apply(9, "succeeded"), {}) is None
    # Without a sequence, the time: the clock that ran ahead is never reached.
    assert started_after_record(_apply(9, "succeeded", created=NOW), AHEAD) is False
