"""The live reads behind an interrupted apply, and writing its record.

`status.activeJob` names a Job the cache does not have. Only live reads can tell a
cache that is behind from a Job that is gone: the Job must be NotFound and the
object's live status must still name it. Whether and where to record it is the
plan's (controller/core/plan/planner.py)."""

from __future__ import annotations

from controller.core import Record, Snapshot
from controller.io import api
from controller.io.api import Api


async def confirmed_gone(client: Api, snap: Snapshot, job: str) -> bool:
    """The Job is NotFound and the live object's status still names it (a cached status
    older than the live one names a Job a later pass already dealt with)."""
    if await api.get_or_none(client, api.job_path(snap.namespace, job)) is not None:
        return False  # the cache is behind
    live = await api.get_or_none(client, api.object_path(snap.kind, snap.namespace, snap.name))
    return live is not None and (live.get("status") or {}).get("activeJob") == job


async def record(client: Api, record: Record) -> None:
    """Writes the record: creates the inputs Secret with it when the plan says it is
    missing, else (or when it exists after all) patches in just the record's annotations."""
    if record.create is not None:
        created = await api.create(client, api.secret_path(record.namespace), record.create)
        if created is not None:
            return
    # Only the record's keys, no precondition: the Secret's data is immutable and no one
    # else writes these annotations.
    patch = {"metadata": {"annotations": record.notes}}
    await api.merge_patch(client, api.secret_path(record.namespace, record.secret), patch)
