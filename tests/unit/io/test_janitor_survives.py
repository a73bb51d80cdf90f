"""The lease janitor outlives a failed sweep: the next one runs as planned."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from controller.io import janitor
from runtime.clock import SteppedClock
from tests.builders import NOW


async def test_a_sweep_that_fails_is_followed_by_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    sweeps: list[str] = []
    failures = [ConnectionResetError("connection reset by peer"), RuntimeError("boom")]

    async def sweep(*_: Any) -> list[str]:
        sweeps.append("sweep")
        if failures:
            raise failures.pop(0)
        return []

    monkeypatch.setattr(janitor, "sweep", sweep)
    clock = SteppedClock(NOW)
    async with anyio.create_task_group() as tg:
        nothing: Any = None  # the stubbed sweep reads no client, caches or launches
        tg.start_soon(janitor.sweep_forever, nothing, nothing, nothing, clock, None)
        await anyio.wait_all_tasks_blocked()  # the janitor sleeps on the clock
        for _ in range(3):
            await clock.advance(janitor.SWEEP_EVERY)
        tg.cancel_scope.cancel()
    assert len(sweeps) == 3  # both failures logged, and the third sweep ran
