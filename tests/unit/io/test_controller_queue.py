"""The controller's work queue: conflicts retry on real time, requeues on the decision clock.

The decision clock here is a `SteppedClock`, as in the kube tests: nothing moves it.
A conflict must still be retried, or an object whose last write met a 409 waits for
an unrelated event (the controller's own writes wake nothing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest
from prometheus_client import CollectorRegistry

from controller.io.main import work_queue
from controller.io.reconciler import CONFLICT
from runtime.clock import SteppedClock
from runtime.loop import DONE, Controller, Result, requeue_after
from runtime.metrics import RuntimeMetrics

pytestmark = pytest.mark.looptime


@dataclass
class Passes:
    """Answers each reconcile of a key with the next of its results, then DONE."""

    script: list[Result]
    calls: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)

    async def reconcile(self, key: str) -> Result:
        self.calls += 1
        if not self.script:
            self.done.set()
            return DONE
        return self.script.pop(0)


@asynccontextmanager
async def controlling(passes: Passes, clock: SteppedClock) -> AsyncIterator[None]:
    metrics = RuntimeMetrics(CollectorRegistry())
    async with work_queue(clock, metrics) as queue:
        controller = Controller("captf", passes, queue, clock=clock, workers=1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(controller.run)
            queue.add("TerraformCluster/ns/c1")
            yield
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("conflicts", [1, 3])
async def test_a_conflict_is_retried_while_the_decision_clock_stands_still(
    conflicts: int,
) -> None:
    clock = SteppedClock()
    passes = Passes([CONFLICT] * conflicts)
    async with controlling(passes, clock):
        with anyio.fail_after(60):  # loop time; the retries take 5 ms, 10 ms, 20 ms
            await passes.done.wait()
    assert passes.calls == conflicts + 1
    assert clock.monotonic() == 0


async def test_a_requeue_after_still_waits_for_the_decision_clock() -> None:
    clock = SteppedClock()
    passes = Passes([requeue_after(30)])
    async with controlling(passes, clock):
        await anyio.sleep(3600)  # an hour of loop time: not the decision clock's
        assert passes.calls == 1
        await clock.advance(30)
        with anyio.fail_after(60):
            await passes.done.wait()
    assert passes.calls == 2
