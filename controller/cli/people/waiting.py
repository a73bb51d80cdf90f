"""An object read from the cluster as DecideOp reads it (`captf restore`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controller.cli.kinds import ref_of
from controller.cli.live import Source, read_snapshot
from controller.core.decide import snapshot
from controller.core.decide.snapshot import Snapshot


@dataclass(frozen=True)
class Live:
    """An object's snapshot as `captf decide --live` reads it, and when it was read."""

    kind: str
    name: str
    now: datetime
    snap: Snapshot

    @property
    def who(self) -> str:
        return f"{self.kind}/{self.name}"


def read_live(ref: str, *, source: Source) -> Live:
    """The object `ref` (KIND/NAME) names, read from `source` as `captf decide --live` reads it."""
    kind, name = ref_of(ref)
    now, objects = read_snapshot(kind, name, source=source)
    return Live(kind, name, now, snapshot.build(objects[0], objects[1:]))
