"""Job times on a scaled controller clock (`--time-scale`, demos and end-to-end tests).

The Job controller and the API server stamp Jobs with wall-clock times. A
controller running K times faster than the wall clock compares those stamps
with its own `now`, so each one is first moved onto its clock: the moment the
controller's clock showed when the wall clock showed the stamp. At scale 1 the
Jobs are used as they are.

A stamp has whole seconds: it stands for some moment within that second, which
on a clock K times faster spans K seconds (a whole minute at K = 60, as long as
the first backoff). The end of the second is taken, so a Job is never seen as
finished earlier than it did and a backoff counted from it never ends early; it
may end up to K seconds of controller time late (one real second)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from controller.core.basics.timefmt import TimeFormatError, format_time, parse_time
from runtime.jsonobj import Json

ToClock = Callable[[datetime], datetime]
# The resolution of a Job's times (metav1.Time).
_STAMP = timedelta(seconds=1)


def on_clock(job: Json, to_clock: ToClock) -> Json:
    """A copy of `job` with its creation, start, completion and condition times moved.
    Only the parts holding a moved time are copied; the rest is shared with the cached
    Job, which no reader mutates (at scale 1 readers get the cached Job itself)."""
    moved = dict(job)
    if "metadata" in job:
        moved["metadata"] = meta = dict(job["metadata"])
        _move(meta, "creationTimestamp", to_clock)
    if job.get("status"):
        moved["status"] = status = dict(job["status"])
        _move(status, "startTime", to_clock)
        _move(status, "completionTime", to_clock)
        if status.get("conditions"):
            status["conditions"] = [dict(cond) for cond in status["conditions"]]
        for cond in status.get("conditions") or []:
            _move(cond, "lastTransitionTime", to_clock)
            _move(cond, "lastProbeTime", to_clock)
    return moved


def _move(holder: Json, key: str, to_clock: ToClock) -> None:
    value = holder.get(key)
    if not value:
        return
    try:
        holder[key] = format_time(to_clock(parse_time(value) + _STAMP))
    except TimeFormatError:
        # Left as written: the core reports an unreadable time where it reads it.
        return


def times_on_clock(obj: Json, to_clock: ToClock) -> Json:
    """A copy of a Pod or Event (as cached) with the times a decision reads moved: the
    creation time, an Event's first time and event time."""
    moved = dict(obj)
    moved["metadata"] = meta = dict(obj.get("metadata") or {})
    _move(meta, "creationTimestamp", to_clock)
    _move(moved, "firstTimestamp", to_clock)
    _move(moved, "eventTime", to_clock)
    return moved
