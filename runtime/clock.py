"""Time, injected.

Everything that waits or compares times takes a `Clock`, so tests run in
virtual time (looptime drives the event loop's clock) instead of sleeping, and
`--time-scale` can compress a demo without touching the logic."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...

    def now(self) -> datetime:
        """The wall-clock time, timezone-aware UTC: what decisions compare against."""
        ...

    async def sleep(self, seconds: float) -> None: ...


def wall_clock() -> datetime:
    return datetime.now(UTC)


def scaled_time(origin: datetime, wall: datetime, scale: float) -> datetime:
    """The scaled timeline's time at `wall`: from `origin` on, time runs `scale` times
    faster. Every process given the same origin computes the same time."""
    return origin + (wall - origin) * scale


class LoopClock:
    """The running event loop's clock (virtual under looptime) and the system's wall clock.

    `now()` follows `monotonic()` from the moment the clock was first read, so
    under looptime both advance together. With a time scale, `origin` anchors the
    scaled timeline: the first reading is `scaled_time(origin, wall)`, so a process
    restarted with the same origin continues the same timeline instead of starting
    a new one at its own start (without an origin, it is the first reading)."""

    def __init__(
        self,
        scale: float = 1.0,
        *,
        origin: datetime | None = None,
        wall: Callable[[], datetime] = wall_clock,
    ) -> None:
        if scale <= 0:
            raise ValueError(f"time scale must be positive, got {scale}")
        # scale K: one second of real time counts as K seconds of controller time.
        self._scale = scale
        self._anchor = origin
        self._wall = wall
        self._origin: tuple[float, datetime] | None = None

    @property
    def scale(self) -> float:
        return self._scale

    def _loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    def monotonic(self) -> float:
        return self._loop_time() * self._scale

    def now(self) -> datetime:
        if self._origin is None:
            wall = self._wall()
            start = wall if self._anchor is None else scaled_time(self._anchor, wall, self._scale)
            self._origin = (self.monotonic(), start)
        start_mono, start_wall = self._origin
        return start_wall + timedelta(seconds=self.monotonic() - start_mono)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0) / self._scale)

    def from_wall(self, wall: datetime) -> datetime:
        """This clock's time at the moment the wall clock read `wall` (a time another
        process wrote, such as kube-controller-manager): `wall` itself at scale 1; at
        scale K every wall-clock second since the origin counts K seconds."""
        if self._anchor is not None:
            return scaled_time(self._anchor, wall, self._scale)
        self.now()
        assert self._origin is not None, "now() sets the origin"
        # Without an anchor the first reading is the wall clock's, and the origin.
        return scaled_time(self._origin[1], wall, self._scale)


class ManualClock:
    """A clock that moves only when told: for pure tests of code that reads time."""

    def __init__(self, start: datetime | None = None) -> None:
        self._wall = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._wall

    def advance(self, seconds: float) -> None:
        self._mono += seconds
        self._wall += timedelta(seconds=seconds)

    async def sleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))
        await asyncio.sleep(0)


class SteppedClock:
    """Virtual time that moves only when `advance` is called; sleepers wake when their time
    comes. For end-to-end tests of delays measured in minutes: the event loop and all I/O
    run in real time, while every wait on this clock is virtual."""

    def __init__(self, start: datetime | None = None) -> None:
        self._wall = start or datetime.now(UTC).replace(microsecond=0)
        self._mono = 0.0
        self._moved = asyncio.Condition()

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._wall + timedelta(seconds=self._mono)

    async def advance(self, seconds: float) -> None:
        async with self._moved:
            self._mono += seconds
            self._moved.notify_all()
        # Let the woken sleepers run before the caller looks at their effects.
        for _ in range(5):
            await asyncio.sleep(0)

    async def sleep(self, seconds: float) -> None:
        until = self._mono + max(seconds, 0.0)
        async with self._moved:
            await self._moved.wait_for(lambda: self._mono >= until)
