"""A rate-limited work queue in the layers of client-go's `util/workqueue`:
de-duplication (`queue`), `add_after` (`delaying`), pure retry-delay
calculators (`ratelimit`) and rate-limited retries (`ratelimiting`)."""

from runtime.workqueue.delaying import DelayingQueue
from runtime.workqueue.queue import SHUTDOWN, NoObserver, QueueObserver, Shutdown, WorkQueue
from runtime.workqueue.ratelimit import (
    DEFAULT_MAX_DELAY,
    ItemExponential,
    MaxOf,
    RateLimiter,
    TokenBucket,
    default_controller_rate_limiter,
)
from runtime.workqueue.ratelimiting import RateLimitingQueue

__all__ = [
    "DEFAULT_MAX_DELAY",
    "SHUTDOWN",
    "DelayingQueue",
    "ItemExponential",
    "MaxOf",
    "NoObserver",
    "QueueObserver",
    "RateLimiter",
    "RateLimitingQueue",
    "Shutdown",
    "TokenBucket",
    "WorkQueue",
    "default_controller_rate_limiter",
]
