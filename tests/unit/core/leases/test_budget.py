"""The background budget's arithmetic (controller/core/leases/budget.py): the share of
the run slots, an identity's budget a minute, the stretch of the schedules.

The properties play the rules out as the controller would apply them, event by event,
and check what issue 39 promises: background Jobs never hold more than their share of
the slots nor start more than their budget in any minute; a change waiting when a slot
comes free gets it; and no object is passed over for ever."""

from __future__ import annotations

import heapq
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.leases import budget
from controller.core.leases.budget import (
    WINDOW,
    BudgetError,
    admitted,
    background_cap,
    background_slots,
    budget_free_at,
    demand_per_minute,
    priority_delay,
    reserve_of,
    slot_wait,
    stretch_of,
    stretched,
)

T0 = datetime(2026, 12, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("slots", "share", "cap", "reserve"),
    [
        (10, 0.5, 5, 1),
        (10, 0.25, 2, 1),
        (10, 1.0, 10, 0),
        (3, 0.5, 1, 1),
        (2, 0.5, 1, 1),
        (1, 0.5, 1, 0),  # one slot: background takes it, or never runs
        (1, 0.01, 1, 0),
        (0, 0.5, 0, 0),
        (7, 0.3, 2, 1),
    ],
)
def test_cap_and_reserve(slots: int, share: float, cap: int, reserve: int) -> None:
    assert (background_cap(slots, share), reserve_of(slots, share)) == (cap, reserve)


@pytest.mark.parametrize(
    ("background", "held", "held_background", "why"),
    [
        (False, 9, 5, None),
        (False, 10, 0, "all 10 run slots are held"),
        (True, 4, 4, None),
        (True, 5, 5, "background Jobs hold their share of the 10 run slots"),
        (True, 9, 2, "the last free run slot is kept for a change"),
        (True, 10, 2, "all 10 run slots are held"),
    ],
)
def test_slot_wait(background: bool, held: int, held_background: int, why: str | None) -> None:
    found = slot_wait(
        background=background, held=held, held_background=held_background, slots=10, share=0.5
    )
    assert (found if found is None else found.split(" (")[0]) == why


@pytest.mark.parametrize("share", [0.0, -0.1, 1.01, float("nan")])
def test_share_out_of_range(share: float) -> None:
    with pytest.raises(BudgetError, match="--background-run-share"):
        budget.check_share(share)


@pytest.mark.parametrize("per_minute", [0, -1, 1.5, True, "40", 1001])
def test_budget_out_of_range(per_minute: object) -> None:
    with pytest.raises(BudgetError, match=r"spec\.backgroundJobsPerMinute"):
        budget.check_per_minute(per_minute, "spec.backgroundJobsPerMinute")  # type: ignore[arg-type]


def test_window_frees_at_the_oldest_start_that_must_leave() -> None:
    starts = [T0 + timedelta(seconds=s) for s in (0, 10, 20)]
    now = T0 + timedelta(seconds=30)
    assert budget_free_at(starts, now, 3) == T0 + timedelta(seconds=60)
    assert budget_free_at(starts, now, 2) == T0 + timedelta(seconds=70)
    assert budget_free_at(starts, now, 4) is None
    # At 60 s the first start has left the window (it counts over (now - 60 s, now]).
    assert admitted(starts, T0 + timedelta(seconds=60), 3) == (
        *starts[1:],
        T0 + timedelta(seconds=60),
    )


def test_stretch() -> None:
    # 500 machines read every 5 min and drift-checked every 30, 20 pools every minute.
    demand = demand_per_minute([300.0] * 500 + [1800.0] * 520 + [60.0] * 20)
    assert demand == pytest.approx(100 + 17.333 + 20, abs=0.01)
    assert stretch_of(demand, 40) == 3.82  # 137.3 / 36, rounded up
    assert stretch_of(30.0, 40) == 1.0
    assert stretched(300.0, 3.82) == pytest.approx(1146.0)
    assert stretched(300.0, 0.5) == 300.0


def test_priority_delay_falls_as_the_wait_grows() -> None:
    delays = [priority_delay(late) for late in (-5, 0, 30, 150, 300, 900, 86400)]
    assert delays == sorted(delays, reverse=True)
    assert delays[0] == delays[1] == budget.PRIORITY_SPAN
    assert delays[-1] > 0


# --- the share, played out ---------------------------------------------------------

Event = tuple[str, int]  # (what happens, which held Job finishes)
ARRIVALS = ["change", "background", "stale background", "finish"]


@settings(max_examples=300, deadline=None)
@given(
    slots=st.integers(1, 12),
    share=st.sampled_from([0.1, 0.25, 0.5, 0.75, 1.0]),
    events=st.lists(st.tuples(st.sampled_from(ARRIVALS), st.integers(0, 50)), max_size=200),
)
def test_background_never_exceeds_its_share(slots: int, share: float, events: list[Event]) -> None:
    """Jobs arrive and finish in any order, each taking a run slot as the launch does: a
    change the lowest free one, a background Job one of `background_slots` once
    `slot_wait` lets it (a "stale" one skips that check, as a pass on a cache that has not
    seen the others' claims would; the slot's own compare-and-swap still holds). Waiting
    Jobs try again whenever a slot comes free, changes first, as the controller wakes
    them. Background never holds more than its cap, stale caches or not; a change that
    waits when one slot frees takes it; and background runs once nothing else wants the
    slots."""
    cap = background_cap(slots, share)
    taken: dict[int, str] = {}  # slot index -> the class of the Job holding it
    waiting: list[str] = []

    def free() -> list[str]:
        return [f"captf-run-slot-{i}" for i in range(slots) if i not in taken]

    def claim(kind: str, *, checked: bool = True) -> bool:
        """Takes a slot for `kind` if the rules let it; whether it did."""
        background = kind != "change"
        if checked:
            why = slot_wait(
                background=background,
                held=len(taken),
                held_background=sum(1 for k in taken.values() if k != "change"),
                slots=slots,
                share=share,
            )
            if why is not None:
                return False
        names = background_slots(free(), slots=slots, share=share) if background else free()
        if not names:
            return False
        taken[int(names[0].rsplit("-", 1)[1])] = kind
        return True

    def retry() -> None:
        for kind in sorted(waiting, key=lambda k: k != "change"):
            if claim(kind):
                waiting.remove(kind)

    for kind, index in events:
        if kind == "finish":
            if taken:
                changes_waiting = "change" in waiting
                taken.pop(sorted(taken)[index % len(taken)])
                before = dict(taken)
                retry()
                if changes_waiting and len(before) == slots - 1:
                    # One slot came free while a change waited: the change has it.
                    [(_, came)] = [(i, k) for i, k in taken.items() if i not in before]
                    assert came == "change"
        elif kind == "stale background":
            if not claim("background", checked=False):
                waiting.append("background")
        elif kind == "change" or "change" not in waiting:
            if not claim(kind):
                waiting.append(kind)
        else:
            waiting.append(kind)
        assert len(taken) <= slots
        assert sum(1 for k in taken.values() if k != "change") <= cap
    # Starvation: with the changes done, every background Job gets a slot in turn.
    taken = {i: k for i, k in taken.items() if k != "change"}
    waiting = [k for k in waiting if k != "change"]
    for _ in range(len(waiting) + 1):
        if taken:
            taken.pop(min(taken))
        retry()
    assert not waiting


# --- the budget, played out ---------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    per_minute=st.integers(1, 30),
    counts=st.tuples(st.integers(0, 80), st.integers(0, 80), st.integers(0, 10)),
    together=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_budget_is_never_exceeded_and_no_object_starves(
    per_minute: int, counts: tuple[int, int, int], together: bool, seed: int
) -> None:
    """Objects of three schedules (health 5 min, drift 30 min, membership 1 min), created
    together or spread, each due at its last start plus its stretched interval plus its
    jitter; a due object that finds the window full looks again when it frees plus its
    priority delay. Over three hours: no 60 s window holds more starts than the budget,
    and no object waits, once due, longer than every other object's turn."""
    rng = random.Random(seed)
    intervals = [300.0] * counts[0] + [1800.0] * counts[1] + [60.0] * counts[2]
    if not intervals:
        return
    stretch = stretch_of(demand_per_minute(intervals), per_minute)
    every = [stretched(i, stretch) for i in intervals]
    jitter = [rng.uniform(0, e * 0.1) for e in every]
    due = [(0.0 if together else rng.uniform(0, 600)) + j for j in jitter]
    # (when it looks, which object): the earliest look goes first.
    looks = [(due[i], i) for i in range(len(intervals))]
    heapq.heapify(looks)
    last: list[float | None] = [None] * len(intervals)
    longest = [0.0] * len(intervals)
    starts: list[datetime] = []
    record: list[float] = []
    while looks[0][0] < 3 * 3600.0:
        now, i = heapq.heappop(looks)
        at = T0 + timedelta(seconds=now)
        kept = admitted(starts, at, per_minute)
        if kept is None:
            free = budget_free_at(starts, at, per_minute)
            assert free is not None
            frees = now + (free - at).total_seconds()
            heapq.heappush(looks, (frees + priority_delay(frees - due[i]), i))
            continue
        starts[:] = kept
        record.append(now)
        # The wait from when it came due (its first, or its last start's interval later).
        longest[i] = max(longest[i], now - due[i])
        last[i] = now
        due[i] = now + every[i] + jitter[i]
        heapq.heappush(looks, (due[i], i))
    # Never over the budget: any WINDOW of starts holds at most per_minute.
    record.sort()
    for k in range(len(record) - per_minute):
        assert record[k + per_minute] - record[k] >= WINDOW - 1e-6
    # Never starved: each start came at most the others' turns after it was due (each
    # goes once before it again: first due, first served), and everyone started.
    turns = (len(intervals) / per_minute + 2) * WINDOW + budget.PRIORITY_SPAN
    assert max(longest) <= turns, (stretch, per_minute)
    assert all(started is not None for started in last)


@pytest.mark.parametrize(
    ("free", "slots", "share", "allowed"),
    [
        (range(10), 10, 0.5, [9, 8, 7, 6, 5]),
        ([0, 1, 2, 7], 10, 0.5, [7]),
        ([0, 1, 2], 10, 0.5, []),
        ([0, 1], 2, 0.5, [1]),
        ([0], 1, 0.5, [0]),
        (range(4), 4, 1.0, [3, 2, 1, 0]),
    ],
)
def test_background_takes_only_the_last_slots_of_its_share(
    free: range | list[int], slots: int, share: float, allowed: list[int]
) -> None:
    """Background Jobs take only the last `background_cap` slots, so however many launch
    at once, the slot Leases (each taken by compare-and-swap) hold them to their cap."""
    names = [f"captf-run-slot-{i}" for i in free]
    assert budget.background_slots(names, slots=slots, share=share) == [
        f"captf-run-slot-{i}" for i in allowed
    ]
