"""Retries through a rate limiter on top of the delaying queue
(client-go `rate_limiting_queue.go`)."""

from __future__ import annotations

from runtime.clock import Clock
from runtime.workqueue.delaying import DelayingQueue
from runtime.workqueue.queue import QueueObserver, T
from runtime.workqueue.ratelimit import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue[T]):
    """A delaying queue whose retries wait as long as the rate limiter says.

    `retry_clock` (default: `clock`) is the time retries wait on and the default rate
    limiter counts in, when it must differ from the time `add_after` waits on: a
    backoff that spares the API server runs on real time while requeues follow a
    scaled or stepped decision clock (one that only a test moves would otherwise hold
    every retry back until the test happens to advance it)."""

    def __init__(
        self,
        *,
        clock: Clock,
        rate_limiter: RateLimiter | None = None,
        observer: QueueObserver | None = None,
        retry_clock: Clock | None = None,
    ) -> None:
        super().__init__(clock=clock, observer=observer)
        self._retry_clock = retry_clock
        self._limiter = rate_limiter or default_controller_rate_limiter(retry_clock or clock)

    def add_rate_limited(self, item: T, *, at_least: float = 0.0) -> float:
        """Add `item` after the limiter's delay, or `at_least` seconds if longer
        (a server's Retry-After); returns the delay used."""
        if self.shutting_down:
            return 0.0
        self._observer.retried(item)
        delay = max(self._limiter.when(item), at_least)
        if self._retry_clock is None or delay <= 0:
            self.add_after(item, delay)
        elif self._task_group is None:
            raise RuntimeError("add_rate_limited needs the queue running: use `async with`")
        else:
            self._task_group.start_soon(self._retry_after, item, delay, self._retry_clock)
        return delay

    async def _retry_after(self, item: T, delay: float, clock: Clock) -> None:
        # One task per waiting retry, cancelled with the queue. An item that also waits
        # in the heap (a requeue) may come twice: the queue coalesces an item already
        # queued, and a reconcile is level-based, so a second pass only finds the same.
        await clock.sleep(delay)
        self.add(item)

    def forget(self, item: T) -> None:
        """Stop tracking `item`'s failures; it does not remove the item from the queue."""
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._limiter.num_requeues(item)
