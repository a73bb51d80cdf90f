"""Jobs this controller created that its cache does not show yet.

The reconciler remembers each create (Job name -> the owner's uid and when, on the
monotonic clock); until the cache shows the Job, DecideOp waits (JobCacheBehind)
instead of deciding from a history that lacks it."""

from __future__ import annotations

from collections.abc import Mapping

# Creates older than this are forgotten: the Job was deleted before the cache saw it.
PENDING_TTL = 300.0

Pending = Mapping[str, tuple[str, float]]


def pending_of(
    pending: Pending, uid: str, seen: set[str], now: float
) -> tuple[dict[str, tuple[str, float]], frozenset[str]]:
    """What to remember from now on, and the Jobs created for the object `uid` that its
    cache does not show yet.

    Forgets those the cache now shows (`seen`) and those older than PENDING_TTL. Matched
    by owner, not by name prefix: cluster "example" must not wait for a Job of pool
    "example-workers"."""
    kept = {
        job: (owner, created)
        for job, (owner, created) in pending.items()
        if not (owner == uid and job in seen) and now - created <= PENDING_TTL
    }
    return kept, frozenset(job for job, (owner, _) in kept.items() if owner == uid)
