"""Freeing Leases whose holder Job never came to be.

Leases are taken before the Job is created. A controller that stops in between
leaves them held in the name of a Job that does not exist; a replay of the same
decision reuses them, but if the object's next decision is another op, nothing
would ever free them, and a run slot would be lost for good. The sweep frees a
Lease whose holder Job is neither in the cache nor being created by this
process, once it has been held longer than any create can take."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from controller.core.jobs import annotations_of
from controller.core.timefmt import TimeFormatError, parse_time
from controller.io import api
from controller.io.api import ANN_HOLDER_NAMESPACE, Api
from controller.io.caches import Caches
from runtime.clock import Clock
from runtime.errors import ApiError

log = logging.getLogger(__name__)
Json = dict[str, Any]

# Longer than the reconciler remembers its own creates (PENDING_TTL), so a Job created
# a moment ago, and not yet in the cache, is never mistaken for one that never was.
STALE_AFTER = 600.0
SWEEP_EVERY = 60.0


def stale_leases(
    leases: Iterable[Json],
    *,
    job_exists: Callable[[str, str], bool],
    creating: set[str],
    now: datetime,
    watched: str | None,
) -> Iterator[Json]:
    """Held Leases whose holder Job does not exist and was taken over STALE_AFTER ago."""
    for lease in leases:
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if not holder or holder in creating:
            continue
        namespace = annotations_of(lease).get(ANN_HOLDER_NAMESPACE) or lease["metadata"].get(
            "namespace", ""
        )
        if watched is not None and namespace != watched:
            continue  # a Job this controller cannot see: not ours to judge
        if job_exists(namespace, str(holder)):
            continue
        try:
            taken = parse_time(spec.get("acquireTime") or spec.get("renewTime"))
        except TimeFormatError:
            continue
        if (now - taken).total_seconds() >= STALE_AFTER:
            yield lease


async def sweep(
    client: Api, caches: Caches, creating: Callable[[], set[str]], clock: Clock, watched: str | None
) -> list[str]:
    """One pass; returns the names of the Leases freed."""
    stale = list(
        stale_leases(
            list(caches.leases.store),
            job_exists=lambda ns, name: caches.job(ns, name) is not None,
            creating=creating(),
            now=clock.now(),
            watched=watched,
        )
    )
    freed = []
    for lease in stale:
        meta = lease["metadata"]
        try:
            await api.release_lease(
                client, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"} | lease
            )
        except ApiError as err:
            log.info("Lease %s/%s not freed: %s", meta.get("namespace"), meta["name"], err)
            continue
        holder = (lease.get("spec") or {}).get("holderIdentity")
        log.warning(
            "freed Lease %s/%s: its holder Job %s never existed",
            meta.get("namespace"),
            meta["name"],
            holder,
        )
        freed.append(meta["name"])
    return freed


async def sweep_forever(
    client: Api, caches: Caches, creating: Callable[[], set[str]], clock: Clock, watched: str | None
) -> None:
    while True:
        await clock.sleep(SWEEP_EVERY)
        await sweep(client, caches, creating, clock, watched)
