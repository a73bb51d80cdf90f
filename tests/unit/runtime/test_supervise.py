"""`supervised`: a task's error is logged with its name and that task alone starts again
(after a doubling delay) or ends; a return ends it; cancellation passes through."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
import pytest

from runtime import supervise
from runtime.supervise import supervised


class Clock:
    """Sleeps take no time and are written down; the monotonic clock moves by `ran` per
    task run (a task's run is what the test says it lasted)."""

    def __init__(self) -> None:
        self.slept: list[float] = []
        self.at = 0.0

    def monotonic(self) -> float:
        return self.at

    def now(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC)

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def _failing(clock: Clock, runs: list[float]) -> tuple[list[int], Callable[[], Awaitable[None]]]:
    """A task that fails once per entry of `runs` (lasting that long), then returns."""
    calls = [0]

    async def task() -> None:
        calls[0] += 1
        if calls[0] <= len(runs):
            clock.at += runs[calls[0] - 1]
            raise RuntimeError(f"failure {calls[0]}")

    return calls, task


async def test_a_failing_task_is_started_again_with_a_doubling_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    calls, task = _failing(clock, [0.0] * 7)
    await supervised("the thing", task, clock)
    assert calls[0] == 8
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) == 7
    assert all(r.getMessage().startswith("the thing failed") for r in failures)
    assert all(r.exc_info is not None for r in failures)


async def test_a_task_that_ran_a_while_starts_again_after_the_first_delay() -> None:
    clock = Clock()
    _, task = _failing(clock, [0.0, 0.0, 0.0, supervise.MAX_DELAY])
    await supervised("t", task, clock)
    assert clock.slept == [1.0, 2.0, 4.0, 1.0]


async def test_without_restart_a_failure_ends_only_that_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    calls, task = _failing(clock, [0.0])
    await supervised("once", task, clock, restart=False)
    assert calls[0] == 1
    assert clock.slept == []
    assert "once failed; it is ended" in caplog.text


async def test_cancellation_is_no_failure(caplog: pytest.LogCaptureFixture) -> None:
    async def forever() -> None:
        await anyio.sleep_forever()

    with anyio.move_on_after(0.01):
        await supervised("waiting", forever, Clock())
    assert "failed" not in caplog.text
