"""The snapshot as a pass's bookkeeping leaves it: what the decision of the pass reads.

The finished Jobs accounted, a Job that disappeared recorded, status.activeJob naming
the Job that runs, and status.lastRestoredSerial as the restore Job's accounting sets
it. Copies: the caches' objects are never written. Pure."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from controller.core.basics.names import ANN_ACCOUNTED
from controller.core.basics.serials import requested_serial
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.history import Finished
from controller.core.jobs.job import annotations_of, is_finished, name_of
from controller.core.plan.accounting import restored_serial
from controller.core.plan.interrupted import Gone
from runtime.jsonobj import Json


def books_of(snap: Snapshot, todo: list[Finished], gone: Gone | None) -> Snapshot:
    """The snapshot as this pass's bookkeeping leaves it: the Jobs accounted, a Job that
    disappeared recorded, and status.activeJob naming the Job that runs. Copies: the
    caches' objects are never written."""
    marked = {r.name for r in todo}
    jobs = tuple(_accounted(j) if name_of(j) in marked else j for j in snap.jobs)
    secrets = dict(snap.secrets)
    if gone is not None and gone.record is not None:
        record = gone.record
        base = secrets.get(record.secret) or record.create or {"metadata": {}}
        notes = annotations_of(base) | record.notes
        secrets[record.secret] = base | {"metadata": base["metadata"] | {"annotations": notes}}
    new = dict(snap.status)
    finished = {name_of(j) for j in snap.jobs if is_finished(j)}
    # A finished Job is no longer active: just accounted, or accounted by a pass whose
    # status write failed afterwards. A Job that disappeared is not active either.
    if new.get("activeJob") in finished or gone is not None:
        new.pop("activeJob", None)
    _note_restore(new, snap, todo)
    if not new.get("activeJob"):
        # Created by a pass that stopped before its status write: adopt it, so that its
        # disappearance is noticed too.
        running = sorted(name_of(j) for j in snap.jobs if not is_finished(j))
        if running:
            new["activeJob"] = running[0]
    return replace(
        snap, obj=snap.obj | {"status": new}, jobs=jobs, secrets=MappingProxyType(secrets)
    )


def _accounted(job: Json) -> Json:
    meta = job.get("metadata", {})
    notes = annotations_of(job) | {ANN_ACCOUNTED: "true"}
    return job | {"metadata": meta | {"annotations": notes}}


def _note_restore(new: Json, snap: Snapshot, todo: list[Finished]) -> None:
    """lastRestoredSerial: set when a restore for the requested serial was attempted,
    cleared when the restore annotation is removed."""
    if requested_serial(snap.annotations) is None:
        new.pop("lastRestoredSerial", None)
        return
    tried = restored_serial(todo)
    if tried is not None:
        new["lastRestoredSerial"] = tried


def restore_tried(snap: Snapshot, todo: list[Finished]) -> Json | None:
    """status.lastRestoredSerial, written before the restore Job is accounted: once it is
    accounted, the status is the only record that the serial was tried, and were the
    status write lost after the accounting, the restore would run again."""
    tried = restored_serial(todo)
    if requested_serial(snap.annotations) is None or tried is None:
        return None
    if snap.status.get("lastRestoredSerial") == tried:
        return None
    return {"lastRestoredSerial": tried}
