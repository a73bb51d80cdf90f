"""Which Lease holds are stale: held for a Job that never came to be, or no longer runs.

Leases are taken before the Job is created; a controller that stops in between
leaves them held in the name of a Job that does not exist. The janitor
(controller/io/janitor.py) frees what these rules name. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from controller.core.basics.names import ANN_ACCOUNTED, ANN_HOLDER_NAMESPACE
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.core.jobs.job import annotations_of
from controller.core.leases import family
from runtime.jsonobj import Json

# Longer than the reconciler remembers its own creates (PENDING_TTL), so a Job created
# a moment ago, and not yet in the cache, is never mistaken for one that never was.
STALE_AFTER = 600.0


def unwatched(namespace: str, watched: str | frozenset[str] | None) -> bool:
    """Whether `namespace` is outside what the controller watches (None: every one; a
    name: that one, `--namespace`; a set: those, `--namespaces`)."""
    if watched is None:
        return False
    return namespace != watched if isinstance(watched, str) else namespace not in watched


def stale_leases(
    leases: Iterable[Json],
    *,
    job_exists: Callable[[str, str], bool],
    creating: set[str],
    now: datetime,
    watched: str | frozenset[str] | None,
) -> Iterator[Json]:
    """Held Leases whose holder Job does not exist and was taken over STALE_AFTER ago."""
    for lease in leases:
        spec = lease.get("spec") or {}
        holder = family.holder_of(lease)
        if not holder or holder in creating:
            continue
        namespace = holder_namespace(lease)
        if unwatched(namespace, watched):
            continue  # a Job this controller cannot see: not ours to judge
        if job_exists(namespace, str(holder)):
            continue
        try:
            taken = parse_time(spec.get("acquireTime") or spec.get("renewTime"))
        except TimeFormatError:
            continue
        if (now - taken).total_seconds() >= STALE_AFTER:
            yield lease


def holder_namespace(lease: Json) -> str:
    """Where a Lease's holder Job lives: a run slot (in the controller's namespace) names
    it; any other Lease lives beside its Job."""
    return str(
        annotations_of(lease).get(ANN_HOLDER_NAMESPACE) or lease["metadata"].get("namespace", "")
    )


def needs_entry(job: str, found: Json | None, creating: set[str]) -> bool:
    """Whether a Job still needs its Lease entry: being created, or there and not yet
    accounted (`found` is the cached Job, None when the cache has none)."""
    accounted = found is not None and annotations_of(found).get(ANN_ACCOUNTED) == "true"
    return job in creating or (found is not None and not accounted)
