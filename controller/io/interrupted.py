"""An apply Job that disappeared while it ran (the spec's section on interrupted applies).

`status.activeJob` names a Job the cache does not have. Only live reads can
tell a cache that is behind from a Job that is gone: the Job must be NotFound
and the object's live status must still name it. Then, for a cluster or pool,
the durable inputs Secret records `captf.io/interrupted-apply`, so an apply of
the current inputs stays due even when they equal the state's."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

from controller.core.inputs import Inputs
from controller.core.jobs import annotations_of
from controller.core.jobspec import inputs_secret, inputs_secret_name, next_seq
from controller.core.names import (
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
    MUTABLE_KINDS,
    Op,
)
from controller.core.snapshot import Snapshot
from controller.core.timefmt import format_time
from controller.io import api
from controller.io.api import Api


class Missing(Enum):
    NONE = "none"  # activeJob is unset or in the cache
    BEHIND = "behind"  # the Job exists: the cache has not shown it yet
    STALE = "stale"  # the cached status is older than the live one: nothing to do
    GONE = "gone"  # confirmed: the Job is gone while the live status names it


def job_op(name: str) -> str:
    parts = name.rsplit("-", 2)
    return parts[1] if len(parts) == 3 else ""


async def check(client: Api, snap: Snapshot, pending: set[str]) -> Missing:
    active = snap.status.get("activeJob")
    if not active or active in snap.job_names() or active in pending:
        return Missing.NONE
    if await api.get_or_none(client, api.job_path(snap.namespace, active)) is not None:
        return Missing.BEHIND
    live = await api.get_or_none(client, api.object_path(snap.kind, snap.namespace, snap.name))
    if live is None or (live.get("status") or {}).get("activeJob") != active:
        return Missing.STALE
    return Missing.GONE


async def record(
    client: Api,
    snap: Snapshot,
    inputs: Inputs | None,
    job: str,
    deleted_by_us: set[str],
    now: datetime,
) -> bool:
    """Records the interrupted apply where the rules ask for it; True when recorded."""
    if job in deleted_by_us or snap.kind not in MUTABLE_KINDS or job_op(job) != Op.APPLY:
        return False
    if inputs is None:
        return False
    name = inputs_secret_name(snap.name, inputs)
    if name not in snap.secrets:
        await api.create(client, api.secret_path(snap.namespace), inputs_secret(snap.obj, inputs))
    if annotations_of(snap.secrets.get(name) or {}).get(ANN_INTERRUPTED_APPLY) == job:
        # Recorded by an earlier pass: rewriting it would move the record past a
        # successor that pass may already have started.
        return True
    notes = {
        ANN_INTERRUPTED_APPLY: job,
        ANN_INTERRUPTED_APPLY_AT: format_time(now),
        ANN_INTERRUPTED_APPLY_SEQ: str(next_seq(snap.jobs, Op.APPLY)),
    }
    patched = await api.merge_patch(
        client, api.secret_path(snap.namespace, name), {"metadata": {"annotations": notes}}
    )
    patched.setdefault("kind", "Secret")
    snap.secrets[name] = patched
    return True
