"""Retry delays as pure calculators (client-go `default_rate_limiters.go`).

A rate limiter answers "how long should this item wait before its next try?"
and keeps the counts that answer depends on; it never sleeps and never touches
the queue. Policies combine with `MaxOf` instead of being special-cased."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from runtime.clock import Clock

# Defaults of controller-runtime's DefaultTypedControllerRateLimiter, with their reasons:
# 5 ms first retry: a conflict or a stale cache usually clears within milliseconds.
DEFAULT_BASE_DELAY = 0.005
# 1000 s cap: doubling from 5 ms reaches it after 18 failures; an item failing that long
# is retried about every 17 minutes, which bounds the load a broken object puts on the API.
DEFAULT_MAX_DELAY = 1000.0
# 10 retries/s overall with a burst of 100: a mass failure (the API server restarted)
# cannot turn every cached object into a retry storm at once.
DEFAULT_QPS = 10.0
DEFAULT_BURST = 100


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds `item` should wait before its next try; counts this as one more retry."""
        ...

    def forget(self, item: Hashable) -> None:
        """The item succeeded (or gave up): its next failure starts from the beginning."""
        ...

    def num_requeues(self, item: Hashable) -> int: ...


class ItemExponential:
    """Per item: base, 2*base, 4*base, ... up to `cap`, one step per failure."""

    def __init__(self, base: float = DEFAULT_BASE_DELAY, cap: float = DEFAULT_MAX_DELAY) -> None:
        if base <= 0 or cap < base:
            raise ValueError(f"need 0 < base <= cap, got base={base} cap={cap}")
        self.base = base
        self.cap = cap
        # Failures since the item was last forgotten; absent means none.
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        # Past 2**64 any sane cap is reached; the bound keeps the float finite.
        return min(self.base * 2.0 ** min(exponent, 64), self.cap)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class TokenBucket:
    """All items together: `burst` tries at once, then `rate` per second.

    Like Go's rate.Limiter.Reserve: each call takes a token even when none is
    left (the count goes negative), and the delay is the time until that token
    would have been refilled. Time comes from the clock's monotonic scale."""

    def __init__(self, clock: Clock, rate: float = DEFAULT_QPS, burst: int = DEFAULT_BURST) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"need rate > 0 and burst >= 1, got rate={rate} burst={burst}")
        self._clock = clock
        self.rate = rate
        self.burst = burst
        # Tokens at `_last`; never above `burst`, negative when tries are booked ahead.
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, item: Hashable) -> float:
        now = self._clock.monotonic()
        if self._last is not None and now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        self._last = now if self._last is None else max(now, self._last)
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def forget(self, item: Hashable) -> None:
        pass  # The bucket is shared: one item's success returns no tokens.

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOf:
    """The longest delay any of its limiters asks for."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one rate limiter")
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        # Every limiter must count the try, so no short-circuit.
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock) -> MaxOf:
    """controller-runtime's default: per-item 5 ms..1000 s, max'd with 10/s burst 100."""
    return MaxOf(ItemExponential(), TokenBucket(clock))
