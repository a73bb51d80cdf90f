"""The observer's bookkeeping of watch deliveries: revisions, exactness, triggers."""

from __future__ import annotations

from runtime.jsonobj import Json
from tests.chaos.observer import INFINITY, Observer


def job(rv: int, *, started: bool = False, outcome: str = "", accounted: bool = False) -> Json:
    status: Json = {}
    if started:
        status["startTime"] = "2026-01-01T00:00:00Z"
    if outcome:
        status["conditions"] = [{"type": outcome, "status": "True"}]
    notes = {"captf.io/accounted": "true"} if accounted else {}
    return {
        "metadata": {
            "uid": "j1",
            "name": "c-apply-1",
            "resourceVersion": str(rv),
            "labels": {"captf.io/uid": "c", "captf.io/op": "apply"},
            "annotations": notes,
        },
        "status": status,
    }


def lease(rv: int, holder: str = "", members: str | None = None) -> Json:
    notes = {"captf.io/member-jobs": members} if members is not None else {}
    return {
        "metadata": {
            "namespace": "ns",
            "name": "captf-op-terraformcluster-c",
            "resourceVersion": str(rv),
            "annotations": notes,
        },
        "spec": {"holderIdentity": holder} if holder else {},
    }


def test_a_job_seen_from_its_create_has_exact_bounds() -> None:
    obs = Observer("ns", "sys")
    obs._job(None, job(10))
    obs._job(job(10), job(12, started=True))
    obs._job(job(12, started=True), job(15, started=True, outcome="Failed"))
    obs._job(job(15), job(16, outcome="Failed", accounted=True))
    record = obs.jobs["j1"]
    assert (record.start, record.end, record.ended, record.exact, record.accounted) == (
        10,
        15,
        "Failed",
        True,
        True,
    )


def test_a_job_first_seen_through_a_relist_is_inexact() -> None:
    obs = Observer("ns", "sys")
    obs.relisting = True
    obs._job(None, job(12, started=True))
    assert obs.jobs["j1"].exact is False


def test_a_deleted_running_job_ends_at_the_revision_of_its_delete() -> None:
    obs = Observer("ns", "sys")
    obs._job(None, job(10))
    obs._job(job(10), job(11, started=True))
    obs.delta_rv = 17
    obs._job(job(11, started=True), None)
    record = obs.jobs["j1"]
    assert (record.end, record.ended, record.exact, record.gone) == (17, "deleted", True, True)


def test_a_delete_found_by_a_relist_is_inexact() -> None:
    obs = Observer("ns", "sys")
    obs._job(None, job(10))
    obs.relisting, obs.delta_rv = True, 30
    obs._job(job(10), None)
    record = obs.jobs["j1"]
    assert (record.end, record.ended, record.exact, record.gone) == (30, "deleted", False, True)


def test_triggers_fire_once_on_the_armed_kind() -> None:
    obs = Observer("ns", "sys")
    fired: list[str] = []
    obs.arm("lease-take", fired.append)
    obs._job(None, job(10))
    assert fired == []
    obs._lease(None, lease(11))
    obs._lease(lease(11), lease(12, members='{"c-pool-apply-1": "t"}'))
    obs._lease(lease(12), lease(13, holder="c-apply-2"))
    assert fired == ["Lease captf-op-terraformcluster-c for c-pool-apply-1"]
    assert obs.jobs["j1"].end == INFINITY


def test_held_leases_include_members_recorded_on_a_cluster_lease() -> None:
    obs = Observer("ns", "sys")
    obs._lease(None, lease(11, members='{"c-pool-apply-1": "t"}'))
    assert [x.claims for x in obs.held_leases()] == [frozenset({"c-pool-apply-1"})]
    obs._lease(lease(11), lease(12, members="{}"))
    assert obs.held_leases() == []
