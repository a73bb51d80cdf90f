"""A Job that disappeared while it ran, as data: what the pass records and frees.

io finds the active Job gone by live reads (Facts.active_gone); this pass then frees
its Leases (a Job that never finishes is never accounted) and, for an apply of a
mutable kind that this controller did not delete itself, records the interruption on
the durable inputs Secret, so the next attempt knows an apply may have half-run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controller.core.basics.names import (
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
    MUTABLE_KINDS,
    Op,
)
from controller.core.basics.timefmt import format_time
from controller.core.decide.facts import Facts
from controller.core.decide.settings import Settings
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import annotations_of, op_of
from controller.core.leases.writes import LeaseWrite
from controller.core.plan.accounting import (
    releases_of,
)
from controller.core.plan.jobspec import inputs_secret, inputs_secret_name
from controller.core.plan.launching import (
    labelled_secret,
)
from controller.core.spec.inputs import Inputs
from controller.core.spec.sharding import shard_labels
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Record:
    """An interrupted-apply record: annotations on the durable inputs Secret, created with
    them (`create`) when the cache does not show it."""

    namespace: str
    secret: str
    notes: dict[str, str]
    create: Json | None


@dataclass(frozen=True)
class Gone:
    """The active Job disappeared while it ran: record it, when the rules ask for it, and
    free its Leases."""

    job: str
    record: Record | None
    releases: tuple[LeaseWrite, ...]


def gone_of(
    snap: Snapshot, inputs: Inputs | None, settings: Settings, facts: Facts, now: datetime
) -> Gone | None:
    if not facts.active_gone:
        return None
    job = str(snap.status.get("activeJob") or "")
    if not job:
        return None
    record = _interrupted_record(snap, inputs, job, settings, facts, now)
    return Gone(job, record, releases_of(snap, job))


def _interrupted_record(
    snap: Snapshot,
    inputs: Inputs | None,
    job: str,
    settings: Settings,
    facts: Facts,
    now: datetime,
) -> Record | None:
    """The record, when the rules ask for one: an apply of a
    cluster or pool that this controller did not delete itself. None also when an earlier
    pass recorded it: rewriting it would move the record past a successor that pass may
    already have started."""
    if job in facts.deleted_by_us or snap.kind not in MUTABLE_KINDS or inputs is None:
        return None
    if op_of({"metadata": {"name": job}}) != Op.APPLY:
        return None
    name = inputs_secret_name(snap.obj, inputs)
    cached = snap.secrets.get(name)
    if annotations_of(cached or {}).get(ANN_INTERRUPTED_APPLY) == job:
        return None
    notes = {
        ANN_INTERRUPTED_APPLY: job,
        ANN_INTERRUPTED_APPLY_AT: format_time(now),
        ANN_INTERRUPTED_APPLY_SEQ: str(snap.next_job(Op.APPLY)[1]),
    }
    create = None
    if cached is None:
        new = inputs_secret(snap.obj, inputs)
        notes_on_new = annotations_of(new) | notes
        create = new | {"metadata": new["metadata"] | {"annotations": notes_on_new}}
        labels = shard_labels(snap.obj, settings.shard_keys)
        create = labelled_secret(create, labels) or create
    return Record(snap.namespace, name, notes, create)
