"""`add_after` on top of the work queue (client-go `delaying_queue.go`).

One task, the waiting loop, owns the heap of not-yet-ready items; `add_after`
only sends it a message, so the heap needs no lock and is never touched from
two places."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, Self

import anyio
import anyio.abc

from runtime.clock import Clock
from runtime.lifecycle import RunsInContext
from runtime.workqueue.queue import QueueObserver, T, WorkQueue


@dataclass(order=True, frozen=True, slots=True)
class _Waiting(Generic[T]):
    ready_at: float
    seq: int  # Ties keep the order of `add_after` calls.
    item: T = field(compare=False)


class DelayingQueue(WorkQueue[T], RunsInContext):
    """A work queue whose items can be added after a delay on the injected clock.

    Use as `async with DelayingQueue(clock=...) as queue:`; leaving the block
    shuts the queue down and drops the items still waiting."""

    def __init__(self, *, clock: Clock, observer: QueueObserver | None = None) -> None:
        super().__init__(observer=observer)
        self._clock = clock
        # Messages to the waiting loop: (item, ready_at on the clock's monotonic scale).
        self._inbox: asyncio.Queue[tuple[T, float]] = asyncio.Queue()
        self._task_group: anyio.abc.TaskGroup | None = None

    def add_after(self, item: T, delay: float) -> None:
        """Add `item` after `delay` seconds; if it already waits, the earlier time wins."""
        if self.shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        if self._task_group is None:
            raise RuntimeError("add_after needs the waiting loop: use `async with` on the queue")
        self._inbox.put_nowait((item, self._clock.monotonic() + delay))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Self]:
        """The waiting loop runs while the block does; leaving it shuts the queue down."""
        async with anyio.create_task_group() as group:
            self._task_group = group
            group.start_soon(self._waiting_loop, name="workqueue waiting loop")
            try:
                yield self
            finally:
                self.shut_down()
                group.cancel_scope.cancel()
                self._task_group = None

    async def _waiting_loop(self) -> None:
        # The heap may hold stale entries for an item whose time was moved earlier;
        # `ready_at` holds each waiting item's one true time, so a popped entry
        # counts only if it matches.
        heap: list[_Waiting[T]] = []
        ready_at: dict[Hashable, float] = {}
        seq = 0
        while True:
            now = self._clock.monotonic()
            while heap and heap[0].ready_at <= now:
                entry = heapq.heappop(heap)
                if ready_at.get(entry.item) == entry.ready_at:
                    del ready_at[entry.item]
                    self.add(entry.item)
            message = await self._receive_until(heap[0].ready_at if heap else None)
            while message is not None:
                item, at = message
                if at < ready_at.get(item, float("inf")):
                    ready_at[item] = at
                    seq += 1
                    heapq.heappush(heap, _Waiting(at, seq, item))
                message = self._inbox.get_nowait() if not self._inbox.empty() else None

    async def _receive_until(self, deadline: float | None) -> tuple[T, float] | None:
        """The next message, or None once the clock's monotonic time reaches `deadline`."""
        if deadline is None:
            return await self._inbox.get()
        message: tuple[T, float] | None = None
        async with anyio.create_task_group() as tg:

            async def alarm() -> None:
                # The time left is read when the alarm starts, not when it was asked for:
                # the clock may have moved in between (a stepped test clock jumps), and a
                # wait computed earlier would then overshoot the deadline.
                await self._clock.sleep(deadline - self._clock.monotonic())
                tg.cancel_scope.cancel()

            tg.start_soon(alarm)
            message = await self._inbox.get()
            tg.cancel_scope.cancel()
        return message
