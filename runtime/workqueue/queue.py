"""The de-duplicating work queue (client-go `util/workqueue/queue.go`).

An item is a key meaning "this needs work"; adding it again before a worker
takes it changes nothing, and a worker never shares an item with another: an
item re-added while a worker has it goes back on the queue only at `done`."""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Hashable
from typing import Final, Generic, Literal, Protocol, TypeVar

T = TypeVar("T", bound=Hashable)


class Shutdown(enum.Enum):
    """What `get` returns once the queue is shut down and empty."""

    SHUTDOWN = "shutdown"


SHUTDOWN: Final = Shutdown.SHUTDOWN


class QueueObserver(Protocol):
    """Told of each item's life in the queue; runtime/metrics.py records it."""

    def added(self, item: Hashable) -> None:
        """The item became dirty (a de-duplicated add is not reported)."""
        ...

    def taken(self, item: Hashable) -> None:
        """A worker took the item."""
        ...

    def done(self, item: Hashable) -> None:
        """The worker that took the item finished with it."""
        ...

    def retried(self, item: Hashable) -> None:
        """The item was re-added through the rate limiter."""
        ...


class NoObserver:
    def added(self, item: Hashable) -> None:
        pass

    def taken(self, item: Hashable) -> None:
        pass

    def done(self, item: Hashable) -> None:
        pass

    def retried(self, item: Hashable) -> None:
        pass


class WorkQueue(Generic[T]):
    """Fair (first added, first taken), de-duplicating, never hands one item to two workers.

    Mutations are synchronous, so no lock is needed; only `get` and
    `shut_down_with_drain` wait."""

    def __init__(self, *, observer: QueueObserver | None = None) -> None:
        self._observer: QueueObserver = observer or NoObserver()
        # Items ready for a worker, in the order they were added. Every one is in
        # `_dirty` and none is in `_processing`.
        self._queue: deque[T] = deque()
        # Items that need work: the queued ones plus any re-added while a worker has them.
        self._dirty: set[T] = set()
        # Items a worker has taken and not yet marked done.
        self._processing: set[T] = set()
        self._shutting_down = False
        # Set and replaced on every change a waiter may care about (a broadcast):
        # each waiter re-checks its own condition, so a lost race costs one loop.
        self._changed = asyncio.Event()

    def add(self, item: T) -> None:
        """Mark `item` as needing work. Ignored once the queue is shutting down."""
        if self._shutting_down or item in self._dirty:
            return
        self._observer.added(item)
        self._dirty.add(item)
        if item in self._processing:
            return  # `done` queues it again.
        self._queue.append(item)
        self._notify()

    async def get(self) -> T | Literal[Shutdown.SHUTDOWN]:
        """The next item, once there is one; the caller must call `done(item)` after.

        After shutdown the items still queued are handed out, then SHUTDOWN."""
        while not self._queue and not self._shutting_down:
            await self._changed.wait()
        if not self._queue:
            return SHUTDOWN
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        self._observer.taken(item)
        return item

    def done(self, item: T) -> None:
        """The worker has finished with `item`; if it was re-added meanwhile, queue it again."""
        self._observer.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._notify()
        elif not self._processing:
            self._notify()  # A drain may be waiting for the last worker.

    def shut_down(self) -> None:
        """Refuse new items; workers drain what is queued, then `get` returns SHUTDOWN."""
        self._shutting_down = True
        self._notify()

    async def shut_down_with_drain(self) -> None:
        """`shut_down`, then wait until every queued and taken item is done."""
        self.shut_down()
        while self._queue or self._processing:
            await self._changed.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Items waiting for a worker (not those being processed)."""
        return len(self._queue)

    def is_processing(self, item: T) -> bool:
        return item in self._processing

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
