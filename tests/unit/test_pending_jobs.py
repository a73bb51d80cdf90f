"""Jobs the reconciler created that the cache does not show yet (JobCacheBehind)."""

from __future__ import annotations

from controller.core.plan.pending import PENDING_TTL, pending_of


def test_an_object_waits_only_for_its_own_created_jobs() -> None:
    # Cluster "example" (uid c) and pool "example-workers" (uid p): the pool's Job name
    # starts with the cluster's name, but it is not the cluster's.
    pending = {
        "example-apply-1a2b3c4d": ("c", 10.0),
        "example-workers-drift-5e6f7a8b": ("p", 11.0),
    }
    assert pending_of(pending, "c", set(), 12.0)[1] == {"example-apply-1a2b3c4d"}
    assert pending_of(pending, "p", set(), 12.0)[1] == {"example-workers-drift-5e6f7a8b"}


def test_seen_and_expired_jobs_are_forgotten() -> None:
    pending = {"a-apply-1": ("a", 0.0), "a-drift-2": ("a", 100.0), "b-apply-3": ("b", 100.0)}
    # The cache shows a-drift-2: no longer pending. a-apply-1 has outlived the TTL.
    kept, mine = pending_of(pending, "a", {"a-drift-2"}, PENDING_TTL + 1)
    assert mine == frozenset()
    assert kept == {"b-apply-3": ("b", 100.0)}
    # Another object's Job is not forgotten because of a name seen for this one.
    assert pending_of(pending, "a", {"b-apply-3"}, 0.0)[1] == {"a-apply-1", "a-drift-2"}
