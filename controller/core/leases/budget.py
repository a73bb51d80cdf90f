"""The background budget, as arithmetic: how much of the run slots, and of an identity's
cloud API, the Jobs that only read (drift checks, health and membership re-reads,
refreshes) may take, so that the Jobs that carry out a change never wait behind them.

Two bounds, each with one rule here that the decision and the launch both read:

- the **share** of the run slots (`--background-run-share`, default 0.5): background
  Jobs hold at most `background_cap` slots at once; changes may hold all of them. And a
  background Job never takes the last `RESERVE` free slot(s): when every slot is held
  and a change waits, the next slot to come free is the change's, whatever waits beside
  it (a controller of a single slot has no slot to keep: its background takes it);
- the **budget** of an identity (`spec.backgroundJobsPerMinute` of a
  TerraformClusterIdentity, else the controller's `--background-jobs-per-minute`):
  at most that many background Jobs start in any `WINDOW` of controller time for the
  objects reading the cloud through it. The starts are recorded on a Lease by the
  launch that makes them (compare-and-swap: two launches cannot both take the last
  one), so the bound holds across workers, restarts and a stale cache.

The budget is met by stretching, not skipping: when the schedules of an identity's
objects ask for more Jobs a minute than its budget (`demand_per_minute`), every
interval of them is multiplied by one factor (`stretch_of`) that brings the demand under
the budget with headroom, so each object is still read once per stretched interval. The
jitter keeps them spread; a burst that comes due together anyway (objects created
together) waits for the window, the first due first (`priority_delay`), so no object is
passed over for ever. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

# The span of controller time a budget counts starts over.
WINDOW: Final = 60.0
# The free slots a background Job leaves for a change (see the module).
RESERVE: Final = 1
# The share of the budget a stretched schedule aims at: below it, so that the jitter's
# bunching is absorbed by the window rather than waited for.
HEADROOM: Final = 0.9
# A waiting background Job retries this much later than the window frees, less the
# more overdue it is: the most overdue takes the next start.
PRIORITY_SPAN: Final = 10.0
# The defaults of the controller's flags.
DEFAULT_SHARE: Final = 0.5
DEFAULT_PER_MINUTE: Final = 60
# The most a budget may be: a minute's starts are one annotation of the budget Lease
# (about 70 bytes each), well under the 256 KiB the API server allows all of them.
MAX_PER_MINUTE: Final = 1000


class BudgetError(ValueError):
    """A share or budget out of range; the message names the bound."""


def check_share(share: float) -> float:
    """`--background-run-share`: more than 0 (a share of 0 would starve every
    background read for ever), at most 1."""
    if not 0 < share <= 1:
        raise BudgetError(f"--background-run-share must be more than 0 and at most 1, got {share}")
    return share


def check_per_minute(per_minute: int, what: str) -> int:
    """A budget: a whole number of background Jobs a minute, from 1 (none would starve
    them all) to MAX_PER_MINUTE (the starts of a minute are recorded on one Lease)."""
    number = isinstance(per_minute, int) and not isinstance(per_minute, bool)
    if not number or not 1 <= per_minute <= MAX_PER_MINUTE:
        raise BudgetError(
            f"{what} must be a whole number from 1 to {MAX_PER_MINUTE}, got {per_minute!r}"
        )
    return per_minute


def background_cap(slots: int, share: float) -> int:
    """The run slots background Jobs may hold at once: the share of them, rounded down,
    but at least one (a share above 0 never starves them)."""
    if slots <= 0:
        return 0
    return max(1, math.floor(slots * share + 1e-9))


def reserve_of(slots: int, share: float) -> int:
    """The free slots a background Job leaves: RESERVE, unless the cap is every slot."""
    return RESERVE if background_cap(slots, share) < slots else 0


def slot_wait(
    *, background: bool, held: int, held_background: int, slots: int, share: float
) -> str | None:
    """Why a Job of its class may not take a run slot now (None: it may), given the slots
    held and how many of them background Jobs hold. The only rule of the share."""
    if held >= slots:
        return f"all {slots} run slots are held"
    if not background:
        return None
    cap = background_cap(slots, share)
    if held_background >= cap:
        # No counts in the words: they change with every Job, and a waiting object's
        # status would be rewritten with them.
        flag = f"--background-run-share={share:g}"
        return f"background Jobs hold their share of the {slots} run slots ({flag})"
    reserve = reserve_of(slots, share)
    if slots - held <= reserve:
        return "the last free run slot is kept for a change"
    return None


def background_slots(free: Sequence[str], *, slots: int, share: float) -> list[str]:
    """Of the free run slots (`captf-run-slot-<i>`, in the order a change tries them, the
    lowest first), those a background Job may take, in its order: only the last
    `background_cap` of the `slots` (indices `slots - cap` and up), the highest first. So
    the share is held by the slot Leases themselves, each taken by compare-and-swap,
    whatever the caches show: background Jobs launching at the same moment cannot hold
    more than their cap. Changes, which try the lowest first, reach those slots last."""
    first = slots - background_cap(slots, share)
    allowed = [name for name in free if _index(name) >= first]
    return sorted(allowed, key=_index, reverse=True)


def _index(slot: str) -> int:
    digits = slot.rsplit("-", 1)[-1]
    return int(digits) if digits.isdigit() else -1


def in_window(starts: Iterable[datetime], now: datetime) -> list[datetime]:
    """The starts that count against a budget at `now`, oldest first: those of the last
    WINDOW (a start recorded ahead of `now`, by a clock ahead of this one, counts too)."""
    since = now - timedelta(seconds=WINDOW)
    return sorted(start for start in starts if start > since)


def budget_free_at(starts: Sequence[datetime], now: datetime, per_minute: int) -> datetime | None:
    """When the next background Job may start under the budget: None when one may now,
    else when enough of the window's starts have left it."""
    counted = in_window(starts, now)
    if len(counted) < per_minute:
        return None
    # The start that must leave the window for one more to fit.
    leaving = counted[len(counted) - per_minute]
    return leaving + timedelta(seconds=WINDOW)


def admitted(
    starts: Sequence[datetime], now: datetime, per_minute: int
) -> tuple[datetime, ...] | None:
    """The starts to record once a background Job starts at `now` (the window's, and this
    one), or None when the budget has none left."""
    if budget_free_at(starts, now, per_minute) is not None:
        return None
    return (*in_window(starts, now), now)


def priority_delay(late: float) -> float:
    """How much later than the window frees a waiting background Job looks again, given
    how late it will be by then (seconds since it came due): PRIORITY_SPAN for one due
    just then, less the longer it has been due, never quite 0. Every waiter reckons from
    the same moment the window frees, so the one that came due first looks first and
    takes the start: first due, first served, whatever its interval, so none waits for
    ever."""
    return round(PRIORITY_SPAN * WINDOW / (WINDOW + max(late, 0.0)), 3)


def demand_per_minute(intervals: Iterable[float]) -> float:
    """Background Jobs a minute a set of schedules asks for: one per interval each."""
    return sum(WINDOW / interval for interval in intervals if interval > 0)


def stretch_of(demand: float, per_minute: int) -> float:
    """The factor every interval of an identity's objects is multiplied by: 1 while the
    demand fits HEADROOM of the budget, else demand over that, rounded up to a hundredth
    (so small changes of the fleet do not move every schedule)."""
    room = per_minute * HEADROOM
    if demand <= room or room <= 0:
        return 1.0
    return math.ceil(demand / room * 100) / 100


def stretched(interval: float, stretch: float) -> float:
    """An interval under a stretch (never shorter than it was)."""
    return interval * max(stretch, 1.0)
