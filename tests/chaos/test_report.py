"""The chaos checks on hand-made records: they must find what they claim to find."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.jsonobj import Json
from tests.chaos import report
from tests.chaos.observer import INFINITY, EventRecord, JobRecord

OWNERS = {
    "uc": report.Owner("c", "c", True),
    "up": report.Owner("c-pool", "c", False),
    "um": report.Owner("c-m0", "c", False),
    "ud": report.Owner("d", "d", True),
}


def job(name: str, owner: str, start: int, end: int = INFINITY, **kw: Any) -> JobRecord:
    return JobRecord(
        uid=kw.pop("uid", name), name=name, owner=owner, op="apply", start=start, end=end, **kw
    )


@pytest.mark.parametrize(
    ("jobs", "same", "family"),
    [
        # back to back: the second created at a later revision than the first ended
        ([job("a", "uc", 1, 5), job("b", "uc", 6, 9)], 0, 0),
        ([job("a", "uc", 1, 5), job("b", "uc", 4, 9)], 1, 0),
        ([job("a", "uc", 1), job("b", "uc", 40)], 1, 0),
        # a cluster and its pool, a pool and its machine, two clusters
        ([job("a", "uc", 1, 5), job("b", "up", 3, 9)], 0, 1),
        ([job("a", "up", 1, 5), job("b", "um", 3, 9)], 0, 0),
        ([job("a", "uc", 1, 5), job("b", "ud", 3, 9)], 0, 0),
        # inexact bounds (seen first through a re-list) are not judged
        ([job("a", "uc", 1, 5), job("b", "up", 3, 9, exact=False)], 0, 0),
    ],
)
def test_overlaps(jobs: list[JobRecord], same: int, family: int) -> None:
    found = report.overlaps(jobs, OWNERS)
    assert (len(found[0]), len(found[1])) == (same, family)


def test_max_concurrent_counts_an_end_before_a_start_at_one_revision() -> None:
    jobs = [job("a", "uc", 1, 5), job("b", "ud", 5, 9), job("c", "up", 6, 8), job("d", "um", 7)]
    peak, which = report.max_concurrent(jobs)
    assert (peak, which) == (3, ["b@5-9", "c@6-8", "d@7-running"])


def finished(name: str, start: int, end: int, uid: str, outcome: str) -> JobRecord:
    result = '{"outcome": "%s", "message": "m"}' % (
        "succeeded" if outcome == "Complete" else "failed"
    )
    last: Json = {
        "metadata": {
            "name": name,
            "labels": {"captf.io/op": "apply"},
            "annotations": {"captf.io/result": result},
        },
        "status": {
            "conditions": [{"type": outcome, "status": "True", "reason": "BackoffLimitExceeded"}]
        },
    }
    return job(name, "uc", start, end, uid=uid, ended=outcome, accounted=True, last=last)


def event(name: str, rv: int, reason: str = "JobFailed") -> EventRecord:
    return EventRecord(
        name=name, uid=f"e{rv}", reason=reason, first_rv=rv, regarding="uc", annotations={}
    )


def test_a_reused_name_without_its_own_event_is_missing_one() -> None:
    first = finished("c-apply-1", 10, 20, "u1", "Failed")
    second = finished("c-apply-1", 40, 50, "u2", "Failed")
    result = report.accounting([first, second], [event("c-apply-1.jobfailed", 21)])
    assert (result["events_missing"], result["events_duplicated"], result["reused_job_names"]) == (
        1,
        0,
        1,
    )
    fixed = report.accounting(
        [first, second],
        [event("c-apply-1.jobfailed", 21), event("c-apply-1-u2.jobfailed", 51)],
    )
    assert (fixed["events_missing"], fixed["events_duplicated"]) == (0, 0)


def test_each_finished_job_owes_exactly_one_event() -> None:
    ok = finished("c-apply-1", 10, 20, "u1", "Complete")
    bad = finished("c-apply-2", 30, 40, "u2", "Failed")
    capped = finished("c-apply-3", 50, 60, "u3", "Failed")
    refreshed = finished("c-refresh-1", 70, 80, "u4", "Complete")
    refreshed.op = "refresh"
    events = [
        event("c-apply-1.u1.applied", 21, "Applied"),
        event("c-apply-2.jobfailed", 41),
        event("c-apply-2.jobfailed", 45),
        event("c-apply-3.jobfailed", 61),
        # the Warning of a failure streak reaching its cap is named after the Job too
        event("c-apply-3.retrycapped", 62, "RetryCapped"),
        event("c-refresh-1.u4.jobfailed", 81),
    ]
    result = report.accounting([ok, bad, capped, refreshed], events)
    assert (
        result["events_owed"],
        result["events_missing"],
        result["events_not_owed"],
        result["events_duplicated"],
    ) == (3, 0, 1, 1)


@pytest.mark.parametrize(
    ("status", "generation", "running", "expected"),
    [
        (
            {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]},
            2,
            False,
            True,
        ),
        (
            {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]},
            2,
            False,
            False,
        ),
        (
            {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "False"}]},
            2,
            False,
            False,
        ),
        (
            {
                "observedGeneration": 2,
                "activeJob": "j",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
            2,
            False,
            False,
        ),
        (
            {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]},
            2,
            True,
            False,
        ),
    ],
)
def test_converged(status: Json, generation: int, running: bool, expected: bool) -> None:
    obj = {"metadata": {"uid": "u", "generation": generation}, "status": status}
    assert report.converged(obj, {"u"} if running else set()) is expected


def test_seconds_summary_counts_a_missing_handover_as_over_target() -> None:
    assert report.seconds_summary([1.0, 3.0, None, 7.0], 5.0) == {
        "n": 4,
        "p50": 3.0,
        "max": 7.0,
        "over_target": 2,
        "target": 5.0,
    }


def test_a_finished_job_left_unaccounted_is_reported_unless_deleted() -> None:
    left = finished("c-apply-1", 10, 20, "u1", "Complete")
    left.accounted = False
    gone = finished("c-apply-2", 30, 40, "u2", "Failed")
    gone.accounted, gone.gone = False, True
    result = report.accounting([left, gone], [])
    assert (result["unaccounted_jobs"], result["events_missing"]) == (1, 0)
