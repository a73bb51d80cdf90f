"""The cluster's operation Lease as the family's compare-and-swap.

Table tests for each claim and release, and a property test that plays any
interleaving of stale reads and conditional writes by a cluster and its members:
whatever the order, no version of the Lease ever records the cluster's Job and a
member's Job at once, and every claim that succeeded is recorded until released."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_MEMBER_JOBS, Reason
from controller.core.basics.timefmt import format_micro
from controller.core.leases import family
from runtime.jsonobj import Json

NOW = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _lease(holder: str = "", members: dict[str, str] | None = None, rv: str = "7") -> Json:
    notes = {ANN_MEMBER_JOBS: orjson.dumps(members).decode()} if members else {}
    spec = {"holderIdentity": holder} if holder else {}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "captf-op-terraformcluster-c1",
            "namespace": "ns",
            "resourceVersion": rv,
            "labels": {"captf.io/cluster": "c1", "captf.io/scope": "cluster"},
            "annotations": notes,
        },
        "spec": spec,
    }


def _cluster(lease: Json | None, job: str = "c1-refresh-1", own: set[str] | None = None) -> Any:
    return family.claim_for_cluster(
        lease, cluster="c1", namespace="ns", job=job, own=own or {job}, now=NOW
    )


def _member(lease: Json | None, job: str = "p1-apply-1") -> Any:
    return family.claim_for_member(lease, cluster="c1", namespace="ns", job=job, now=NOW)


T = format_micro(NOW)
CLAIMS = [
    # (case, claim, lease, expected holder after, expected members after, or a wait reason)
    ("cluster, no Lease yet", _cluster, None, "c1-refresh-1", {}, None),
    ("cluster, free Lease", _cluster, _lease(), "c1-refresh-1", {}, None),
    (
        "cluster over its own finished Job",
        lambda lease: _cluster(lease, own={"c1-old", "c1-refresh-1"}),
        _lease("c1-old"),
        "c1-refresh-1",
        {},
        None,
    ),
    (
        "cluster while a member runs",
        _cluster,
        _lease(members={"p1-apply-1": T}),
        None,
        None,
        Reason.WAITING_FOR_MACHINE_OPERATIONS,
    ),
    (
        "cluster while another incarnation's Job holds it",
        lambda lease: _cluster(lease, own={"c1-refresh-1"}),
        _lease("c1-from-before"),
        None,
        None,
        Reason.WAITING_FOR_CLUSTER_OPERATION,
    ),
    ("member, no Lease yet", _member, None, "", {"p1-apply-1": T}, None),
    (
        "member beside another member",
        _member,
        _lease(members={"m1-apply-1": "x"}),
        "",
        {"m1-apply-1": "x", "p1-apply-1": T},
        None,
    ),
    (
        "member while the cluster runs",
        _member,
        _lease("c1-refresh-1"),
        None,
        None,
        Reason.WAITING_FOR_CLUSTER_OPERATION,
    ),
]


@pytest.mark.parametrize(
    ("claim", "lease", "holder", "members", "wait"),
    [c[1:] for c in CLAIMS],
    ids=[c[0] for c in CLAIMS],
)
def test_claims(
    claim: Any, lease: Json | None, holder: str, members: dict[str, str], wait: str | None
) -> None:
    change = claim(lease)
    if wait is not None:
        assert isinstance(change, family.Busy)
        assert change.reason == wait
        return
    assert isinstance(change, dict)
    assert family.holder_of(change) == holder
    assert family.member_jobs(change) == members
    assert change["metadata"]["labels"] == {"captf.io/cluster": "c1", "captf.io/scope": "cluster"}
    # The precondition: the version read, or none for a create.
    assert change["metadata"].get("resourceVersion") == (lease or {}).get("metadata", {}).get(
        "resourceVersion"
    )


def test_a_claim_already_recorded_writes_nothing() -> None:
    assert _cluster(_lease("c1-refresh-1")) is None
    assert _member(_lease(members={"p1-apply-1": T})) is None


def test_release_removes_only_that_job() -> None:
    both = _lease(members={"p1-apply-1": T, "m1-apply-1": T})
    released = family.release(both, "p1-apply-1")
    assert released is not None
    assert family.member_jobs(released) == {"m1-apply-1": T}
    last = family.release(released, "m1-apply-1")
    assert last is not None
    assert ANN_MEMBER_JOBS not in last["metadata"]["annotations"]
    held = family.release(_lease("c1-refresh-1"), "c1-refresh-1")
    assert held is not None
    assert family.holder_of(held) == ""
    assert family.release(_lease("c1-refresh-1"), "p1-apply-1") is None


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"text"'])
def test_a_mangled_record_reads_as_empty(raw: str) -> None:
    lease = _lease()
    lease["metadata"]["annotations"][ANN_MEMBER_JOBS] = raw
    assert family.member_jobs(lease) == {}


def test_stale_members() -> None:
    old = format_micro(NOW - timedelta(seconds=600))
    recent = format_micro(NOW - timedelta(seconds=599))
    lease = _lease(members={"gone": old, "young": recent, "running": old, "bad": "x"})
    stale = family.stale_members(lease, live=lambda job: job == "running", now=NOW, after=600)
    assert stale == ["bad", "gone"]
    assert family.member_jobs(family.without(lease, stale)) == {"young": recent, "running": old}


# --- every interleaving of stale reads and conditional writes --------------------------

ACTORS = ["c1", "p1", "p2", "m1"]  # the cluster and three members


class Server:
    """A Lease store that accepts a write only over the current resourceVersion."""

    def __init__(self) -> None:
        self.versions: list[Json | None] = [None]

    def read(self, back: int) -> tuple[int, Json | None]:
        index = max(len(self.versions) - 1 - back, 0)  # possibly stale, as a cache is
        return index, self.versions[index]

    def write(self, read_at: int, change: Json) -> bool:
        if read_at != len(self.versions) - 1:
            return False  # 409
        self.versions.append(change | {"metadata": change["metadata"] | {"rv": read_at + 1}})
        return True


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(ACTORS), st.booleans(), st.integers(0, 3)),
        min_size=1,
        max_size=40,
    )
)
def test_no_version_records_the_cluster_and_a_member(steps: list[tuple[str, bool, int]]) -> None:
    server = Server()
    running: dict[str, str] = {}  # actor -> its Job, once its claim was written
    serial = 0
    for actor, start, staleness in steps:
        read_at, current = server.read(staleness)
        if start and actor not in running:
            serial += 1
            job = f"{actor}-job-{serial}"
            claim = _cluster if actor == "c1" else _member
            change = claim(current, job=job)
            if isinstance(change, dict) and server.write(read_at, change):
                running[actor] = job
        elif not start and actor in running and current is not None:
            change = family.release(current, running[actor])
            if change is not None and server.write(read_at, change):
                del running[actor]
        latest = server.versions[-1]
        assert not (family.holder_of(latest) and family.member_jobs(latest))
        # Whoever believes it runs is recorded in the latest version.
        recorded = {family.holder_of(latest)} | set(family.member_jobs(latest))
        assert set(running.values()) <= recorded
        assert not ("c1" in running and len(running) > 1)
