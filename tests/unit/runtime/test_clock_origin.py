"""A scaled clock anchored to a recorded origin: a restart continues the same timeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from runtime.clock import LoopClock, scaled_time

ORIGIN = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("real_seconds", "scale", "scaled_seconds"),
    [(0, 30, 0), (10, 30, 300), (10, 1, 10), (2, 0.5, 1), (-4, 30, -120)],
)
def test_scaled_time(real_seconds: float, scale: float, scaled_seconds: float) -> None:
    wall = ORIGIN + timedelta(seconds=real_seconds)
    assert scaled_time(ORIGIN, wall, scale) == ORIGIN + timedelta(seconds=scaled_seconds)


@pytest.mark.looptime
async def test_a_restarted_clock_continues_the_timeline() -> None:
    wall = [ORIGIN + timedelta(seconds=100)]
    first = LoopClock(30, origin=ORIGIN, wall=lambda: wall[0])
    assert first.now() == ORIGIN + timedelta(seconds=3000)
    await anyio.sleep(5)  # virtual: the loop and the wall move together
    wall[0] += timedelta(seconds=5)
    before_restart = first.now()
    assert before_restart == ORIGIN + timedelta(seconds=3150)

    # The process restarts 2 real seconds later: the new clock is 60 scaled seconds on,
    # not back at the origin, and both keep step from there.
    wall[0] += timedelta(seconds=2)
    await anyio.sleep(2)
    restarted = LoopClock(30, origin=ORIGIN, wall=lambda: wall[0])
    assert restarted.now() == before_restart + timedelta(seconds=60) == first.now()


@pytest.mark.looptime
async def test_without_an_origin_the_timeline_starts_at_the_first_reading() -> None:
    wall = ORIGIN + timedelta(hours=1)
    clock = LoopClock(30, wall=lambda: wall)
    assert clock.now() == wall
    await anyio.sleep(1)
    assert clock.now() == wall + timedelta(seconds=30)
