"""Retries through a rate limiter on top of the delaying queue
(client-go `rate_limiting_queue.go`)."""

from __future__ import annotations

from runtime.clock import Clock
from runtime.workqueue.delaying import DelayingQueue
from runtime.workqueue.queue import QueueObserver, T
from runtime.workqueue.ratelimit import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue[T]):
    """A delaying queue whose retries wait as long as the rate limiter says."""

    def __init__(
        self,
        *,
        clock: Clock,
        rate_limiter: RateLimiter | None = None,
        observer: QueueObserver | None = None,
    ) -> None:
        super().__init__(clock=clock, observer=observer)
        self._limiter = rate_limiter or default_controller_rate_limiter(clock)

    def add_rate_limited(self, item: T, *, at_least: float = 0.0) -> float:
        """Add `item` after the limiter's delay, or `at_least` seconds if longer
        (a server's Retry-After); returns the delay used."""
        if self.shutting_down:
            return 0.0
        self._observer.retried(item)
        delay = max(self._limiter.when(item), at_least)
        self.add_after(item, delay)
        return delay

    def forget(self, item: T) -> None:
        """Stop tracking `item`'s failures; it does not remove the item from the queue."""
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._limiter.num_requeues(item)
