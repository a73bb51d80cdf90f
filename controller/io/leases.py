"""Carrying out one Lease write of a plan: read the Lease live, apply the core's change,
write it with the read version's resourceVersion as precondition.

Reading live, not from the cache: a Lease is written by several objects' reconciles in
quick succession (a slot freed by one pass and taken by the next), and a write over a
cached version the cache has not caught up with would only fail with 409. The
precondition is what excludes: a concurrent writer makes this write fail with 409,
which the reconcile turns into a retry."""

from __future__ import annotations

import contextlib
from datetime import datetime

from controller.core import LEASE_API, Busy, LeaseWrite, Role, change_of
from controller.io import api
from controller.io.api import Api


class LeaseBusy(Exception):
    """Someone else holds the Lease: the reconcile waits and comes back."""

    def __init__(self, busy: Busy) -> None:
        super().__init__(busy.message)
        self.busy = busy


async def carry_out(client: Api, write: LeaseWrite, now: datetime) -> bool:
    """Performs the write; False when the Lease already said what it wants (nothing sent).
    Raises LeaseBusy when another holds it, ApiError(409) when it changed meanwhile."""
    path = api.lease_path(write.namespace, write.name)
    live = await api.get_or_none(client, path)
    change = change_of(write, None if live is None else LEASE_API | live, now)
    if change is None:
        return False
    if isinstance(change, Busy):
        raise LeaseBusy(change)
    if live is None:
        await client.request("POST", api.lease_path(write.namespace), body=change)
    else:
        await client.request("PUT", path, body=change)
    return True


async def give_back(client: Api, write: LeaseWrite, now: datetime) -> None:
    """Best effort: frees a Lease this pass took for a Job it did not create after all. A
    Lease left held for a Job that never came to be is the janitor's."""
    with contextlib.suppress(Exception):
        await carry_out(
            client, LeaseWrite(write.namespace, write.name, write.job, Role.RELEASE), now
        )
