"""Freeing Leases whose holder Job never came to be.

Leases are taken before the Job is created. A controller that stops in between
leaves them held in the name of a Job that does not exist; a replay of the same
decision reuses them, but if the object's next decision is another op, nothing
would ever free them, and a run slot would be lost for good. The sweep frees a
Lease whose holder Job is neither in the cache nor being created by this
process, once it has been held longer than any create can take. The same goes
for a member's entry on its cluster's operation Lease, and for an entry whose
Job was accounted without its release (the member's clusterRef had changed).

The cache only nominates: a Lease is freed once a live GET of its holder Job
answers 404 at the moment of freeing, and the holder is not being created by
this process then. A sweep frees Leases one at a time (seconds, under load), and
Job names are deterministic: a replayed decision creates a Job under the very
name an earlier process left the Lease held for, without rewriting the Lease. A
verdict taken from the cache at the sweep's start would free the slot under it.
From the holder's check to the release being written, the reconciler starts no
launch of that Job name (`Launches.begin_freeing`), and the janitor frees nothing
a launch in flight holds: the Job's absence stays true until the release lands.
(Only the leader launches, in this event loop.) The process memory
(controller/io/memory.py) is what answers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from controller.core import (
    STALE_AFTER,
    LeaseWrite,
    Role,
    family,
    holder_namespace,
    needs_entry,
    stale_leases,
    unwatched,
)
from controller.io import api, leases
from controller.io.api import Api
from controller.io.caches import Caches
from controller.io.leases import LeaseBusy
from runtime.clock import Clock
from runtime.errors import ApiError
from runtime.jsonobj import Json

log = logging.getLogger(__name__)


class Launches(Protocol):
    """What the janitor needs of the process memory (controller.io.memory.Memory): the
    Jobs being created here, and a mark that keeps their launch from starting while it
    frees a Lease held in their name."""

    def creating(self) -> set[str]: ...

    def begin_freeing(self, job: str) -> bool: ...

    def end_freeing(self, job: str) -> None: ...


SWEEP_EVERY = 60.0


async def sweep(
    client: Api,
    caches: Caches,
    launches: Launches,
    clock: Clock,
    watched: str | frozenset[str] | None,
) -> list[str]:
    """One pass; returns the names of the Leases freed."""
    stale = list(
        stale_leases(
            caches.all_leases(),
            job_exists=lambda ns, name: caches.job(ns, name) is not None,
            creating=launches.creating(),
            now=clock.now(),
            watched=watched,
        )
    )
    freed = await _free_holders(client, stale, launches, clock.now())
    freed += await _free_member_entries(client, caches, launches.creating(), clock.now(), watched)
    return freed


async def _free_holders(
    client: Api, stale: list[Json], launches: Launches, now: datetime
) -> list[str]:
    freed = []
    for lease in stale:
        meta = lease["metadata"]
        holder = family.holder_of(lease)
        if not launches.begin_freeing(holder):
            continue  # being created here right now
        try:
            if await _job_is_there(client, holder_namespace(lease), holder):
                log.info("Lease %s/%s kept: its holder Job %s exists", *_where(meta), holder)
                continue
            write = LeaseWrite(str(meta.get("namespace", "")), meta["name"], holder, Role.RELEASE)
            # Read live and freed only while that holder still holds it.
            await leases.carry_out(client, write, now)
        except (ApiError, LeaseBusy) as err:
            log.info("Lease %s/%s not freed: %s", *_where(meta), err)
            continue
        finally:
            launches.end_freeing(holder)
        log.warning(
            "freed Lease %s/%s: its holder Job %s does not exist",
            meta.get("namespace"),
            meta["name"],
            holder,
        )
        freed.append(meta["name"])
    return freed


async def _free_member_entries(
    client: Api,
    caches: Caches,
    creating: set[str],
    now: datetime,
    watched: str | frozenset[str] | None,
) -> list[str]:
    """Drops stale member entries from the cached cluster Leases; the cached version's
    resourceVersion is the precondition, so an entry written meanwhile is never lost."""
    freed = []
    for lease in caches.all_leases():
        namespace = lease["metadata"].get("namespace", "")
        if unwatched(namespace, watched):
            continue
        live = _live_in(caches, namespace, creating)
        stale = family.stale_members(lease, live=live, now=now, after=STALE_AFTER)
        stale = [job for job in stale if not await _job_is_there(client, namespace, job)]
        if not stale:
            continue
        full: Json = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"} | lease
        try:
            await api.replace_lease(client, family.without(full, stale))
        except ApiError as err:
            log.info("Lease %s/%s: entries not freed: %s", namespace, full["metadata"]["name"], err)
            continue
        log.warning(
            "freed %s on Lease %s/%s: no such Job runs",
            ", ".join(stale),
            namespace,
            full["metadata"]["name"],
        )
        freed.append(full["metadata"]["name"])
    return freed


async def _job_is_there(client: Api, namespace: str, name: str) -> bool:
    """Read live: only the API server's 404 proves a Job is not there (any other error
    keeps the Lease until the next sweep)."""
    return await api.get_or_none(client, api.job_path(namespace, name)) is not None


def _where(meta: Json) -> tuple[str, str]:
    return str(meta.get("namespace", "")), str(meta["name"])


def _live_in(caches: Caches, namespace: str, creating: set[str]) -> Callable[[str], bool]:
    def live(job: str) -> bool:
        return needs_entry(job, caches.job(namespace, job), creating)

    return live


async def sweep_forever(
    client: Api,
    caches: Caches,
    launches: Launches,
    clock: Clock,
    watched: str | frozenset[str] | None,
) -> None:
    """Sweeps every SWEEP_EVERY seconds. A failed sweep (the API server unreachable, an
    error answer) is logged and the next one tries again: the janitor never takes the
    controller down with it."""
    while True:
        await clock.sleep(SWEEP_EVERY)
        try:
            await sweep(client, caches, launches, clock, watched)
        except Exception as err:
            log.warning("lease sweep failed: %s; retrying in %.0fs", err, SWEEP_EVERY)
