"""Carrying out one Lease write of a plan: apply the core's change to a version of the
Lease and write it with that version's resourceVersion as precondition.

The precondition is what excludes: a concurrent writer makes the write fail with 409.
The version tried first is the one this process knows (`Known`): the cache's, or the
one it wrote itself when the watch has not delivered that yet (the next launch's
claims often come sooner). A write over it saves a live read. A known version behind
the live one costs a 409 (or a 404, for a Lease deleted since), and the live read
follows. Only a write is tried so: an answer of "nothing to do" or "held by another"
may come from a version the cache has not caught up with (a slot freed by one pass and
taken by the next), so that answer is always the live Lease's. A 409 over the live
version is the reconcile's to retry."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Final

from controller.core import LEASE_API, Busy, LeaseWrite, Role, change_of
from controller.io import api
from controller.io.api import Api
from runtime.errors import ApiError
from runtime.jsonobj import Json

# Answers to a write over a known version that only say it was not the live one.
_STALE: Final = frozenset({404, 409})


class Known:
    """The Leases as this process knows them, by namespace and name: the cache's copy
    (`cached`), or the version this process wrote last while it is newer than that.
    Without `cached` nothing is known, and every write reads the Lease live."""

    KEPT: Final = 4096  # the versions written remembered, the oldest forgotten first

    def __init__(self, cached: Callable[[str, str], Json | None] | None = None) -> None:
        self._cached = cached
        self._written: OrderedDict[tuple[str, str], Json] = OrderedDict()

    def __call__(self, namespace: str, name: str) -> Json | None:
        if self._cached is None:
            return None
        cached = self._cached(namespace, name)
        mine = self._written.get((namespace, name))
        if mine is not None and (cached is None or _newer(mine, cached)):
            return mine
        self._written.pop((namespace, name), None)
        return cached

    def wrote(self, lease: Json) -> None:
        """`lease` as the API server answered a write of it."""
        if self._cached is None:
            return
        meta = lease.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self._written[key] = lease
        self._written.move_to_end(key)
        while len(self._written) > self.KEPT:
            self._written.popitem(last=False)


def _newer(one: Json, other: Json) -> bool:
    """Whether `one` is a later version than `other`. resourceVersions are etcd's
    revisions here; one that is not a number is never taken for newer."""
    try:
        return int(one["metadata"]["resourceVersion"]) > int(other["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False


class LeaseBusy(Exception):
    """Someone else holds the Lease: the reconcile waits and comes back."""

    def __init__(self, busy: Busy) -> None:
        super().__init__(busy.message)
        self.busy = busy


async def carry_out(
    client: Api, write: LeaseWrite, now: datetime, known: Known | None = None
) -> bool:
    """Performs the write; False when the Lease already said what it wants (nothing sent).
    Raises LeaseBusy when another holds it, ApiError(409) when it changed meanwhile."""
    known = known or Known()
    path = api.lease_path(write.namespace, write.name)
    if await _over_known(client, path, write, known, now):
        return True
    live = await api.get_or_none(client, path)
    change = change_of(write, None if live is None else LEASE_API | live, now)
    if change is None:
        return False
    if isinstance(change, Busy):
        raise LeaseBusy(change)
    if live is None:
        known.wrote(await client.request("POST", api.lease_path(write.namespace), body=change))
    else:
        known.wrote(await client.request("PUT", path, body=change))
    return True


async def _over_known(
    client: Api, path: str, write: LeaseWrite, known: Known, now: datetime
) -> bool:
    """The write over the known version; True when it took, False when the live Lease
    must answer (none known, nothing to write or a holder in it, or not the live one)."""
    version = known(write.namespace, write.name)
    if version is None:
        return False
    change = change_of(write, LEASE_API | version, now)
    if change is None or isinstance(change, Busy):
        return False
    try:
        known.wrote(await client.request("PUT", path, body=change))
    except ApiError as err:
        if err.status not in _STALE:
            raise
        return False
    return True


async def give_back(client: Api, write: LeaseWrite, now: datetime) -> None:
    """Best effort: frees a Lease this pass took for a Job it did not create after all. A
    Lease left held for a Job that never came to be is the janitor's."""
    with contextlib.suppress(Exception):
        await carry_out(
            client, LeaseWrite(write.namespace, write.name, write.job, Role.RELEASE), now
        )
