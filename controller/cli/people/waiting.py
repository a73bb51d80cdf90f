"""The Job an object waits to have approved, read from the cluster as DecideOp reads it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from controller.cli.kinds import ref_of
from controller.cli.live import Source, read_snapshot
from controller.cli.people.common import Refused
from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue, to_json
from controller.core.decide.snapshot import Snapshot
from controller.core.decide.steps import awaiting_approval, context_of, decide

Json = dict[str, Any]


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


def waiting_job(live: Live) -> str:
    """The Job `captf.io/approve` must name for the object to proceed; refused, saying
    why, when none waits."""
    ctx = context_of(live.snap, live.now)
    if isinstance(ctx, Requeue):
        raise Refused(f"{live.who} cannot be decided on ({ctx.reason}: {ctx.message})")
    job = awaiting_approval(ctx)
    if job is not None:
        return job
    decision = orjson.dumps(to_json(decide(live.snap, live.now), verbose=True)).decode()
    if ctx.approved:
        raise Refused(
            f"nothing of {live.who} waits for approval: captf.io/approve already names "
            f"{ctx.approved}; the controller decides {decision}"
        )
    raise Refused(f"nothing of {live.who} waits for approval; the controller decides {decision}")
