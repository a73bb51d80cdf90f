"""Job times on a scaled controller clock (`--time-scale`, demos and end-to-end tests).

The Job controller and the API server stamp Jobs with wall-clock times. A
controller running K times faster than the wall clock compares those stamps
with its own `now`, so each one is first moved onto its clock: the moment the
controller's clock showed when the wall clock showed the stamp. At scale 1 the
Jobs are used as they are."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

from controller.core.timefmt import TimeFormatError, format_time, parse_time

Json = dict[str, Any]
ToClock = Callable[[datetime], datetime]


def on_clock(job: Json, to_clock: ToClock) -> Json:
    """A copy of `job` with its creation, start, completion and condition times moved."""
    moved = copy.deepcopy(job)
    meta = moved.get("metadata") or {}
    _move(meta, "creationTimestamp", to_clock)
    status = moved.get("status") or {}
    _move(status, "startTime", to_clock)
    _move(status, "completionTime", to_clock)
    for cond in status.get("conditions") or []:
        _move(cond, "lastTransitionTime", to_clock)
        _move(cond, "lastProbeTime", to_clock)
    return moved


def _move(holder: Json, key: str, to_clock: ToClock) -> None:
    value = holder.get(key)
    if not value:
        return
    try:
        holder[key] = format_time(to_clock(parse_time(value)))
    except TimeFormatError:
        # Left as written: the core reports an unreadable time where it reads it.
        return
