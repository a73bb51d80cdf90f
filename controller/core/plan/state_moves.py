"""Moving a state and its backups from the names before kinds were part of them.

Before, an object's state was `<name>-state` and its backups `<name>-state-<serial>`,
from the name alone: a TerraformCluster and a TerraformMachinePool of one name shared
them. Now they are named from namespace, kind and name (controller/core/basics/names.py).
An object that wrote the older names has them moved on its first reconcile, by the
controller, without a Job and without a re-apply.

Invariants:
- Only Secrets labelled for the object (its kind and name) move; another's, or one
  without our labels, is never touched.
- Nothing moves while one of the object's Jobs runs: its runner reads and writes the
  names it started with.
- A move is two steps, each a pass of its own: `COPY` writes the new Secret (the data,
  labels and annotations of the old) and reads it back to compare; `RETIRE` deletes the
  old one, over its resourceVersion, once the snapshot shows the new one. The snapshot
  reads the new name first and the old one after it, so a pass (a deletion's included)
  always finds a state: the old until the new is seen, the new from then on.
- The older state where a state of the new name already exists (a runner wrote it,
  having read the older one) is a backup of its own serial, not the state.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from controller.core.basics.names import (
    ANN_SERIAL,
    LABEL_BACKUP_OF,
    backup_secret_name,
    labelled_for,
    legacy_state_secret_name,
)
from controller.core.basics.serials import serial_of
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import annotations_of, is_finished, labels_of, name_of


class MoveStep(StrEnum):
    COPY = "copy"  # write `target` from `source`, read it back, compare
    RETIRE = "retire"  # `target` is shown: delete `source` (after comparing the two again)


@dataclass(frozen=True)
class Move:
    step: MoveStep
    source: str
    target: str
    backup_of: str | None = None  # set when the target is a backup: its label


def state_moves(snap: Snapshot) -> tuple[Move, ...]:
    """The moves this pass carries out, in order; none while a Job of the object runs."""
    if any(not is_finished(job) for job in snap.jobs):
        return ()
    moves = [*_state(snap), *_backups(snap)]
    return tuple(moves)


def _state(snap: Snapshot) -> list[Move]:
    legacy = legacy_state_secret_name(snap.name)
    old = snap.secrets.get(legacy)
    if old is None or not labelled_for(old, snap.kind, snap.name):
        return []
    if snap.state_name not in snap.secrets:
        return [Move(MoveStep.COPY, legacy, snap.state_name)]
    copied = _copied_as(snap, legacy)
    if copied is not None:
        return [copied]
    # A state of the new name exists (written by a runner that read the older one, or
    # copied already): the older is kept as the backup of its serial.
    serial = serial_of(annotations_of(old).get(ANN_SERIAL))
    if serial is None:
        return []  # unreadable: left for the operator, and read after the new one never
    target = backup_secret_name(snap.state_name, serial)
    step = MoveStep.RETIRE if target in snap.secrets else MoveStep.COPY
    return [Move(step, legacy, target, backup_of=snap.name)]


def _copied_as(snap: Snapshot, legacy: str) -> Move | None:
    """The retire of the older state once its copy under the new name is shown: the two
    carry the same serial annotation (io compares the data before it deletes)."""
    old, new = snap.secrets[legacy], snap.secrets[snap.state_name]
    if annotations_of(old).get(ANN_SERIAL) != annotations_of(new).get(ANN_SERIAL):
        return None
    return Move(MoveStep.RETIRE, legacy, snap.state_name)


def _backups(snap: Snapshot) -> list[Move]:
    prefix = f"{legacy_state_secret_name(snap.name)}-"
    moves = []
    for backup in snap.backups():
        name = name_of(backup)
        serial = serial_of(annotations_of(backup).get(ANN_SERIAL))
        if not name.startswith(prefix) or serial is None or name != f"{prefix}{serial}":
            continue
        if labels_of(backup).get(LABEL_BACKUP_OF) != snap.name:
            continue
        target = backup_secret_name(snap.state_name, serial)
        step = MoveStep.RETIRE if target in snap.secrets else MoveStep.COPY
        moves.append(Move(step, name, target, backup_of=snap.name))
    return moves
