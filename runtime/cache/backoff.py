"""How long a reflector waits before it tries the API server again.

client-go's reflector values: start at 0.8 s, double per consecutive failure,
stop growing at 30 s. Jitter spreads reconnects of many watchers after an API
server restart so they do not arrive as one wave."""

from __future__ import annotations

import random

INITIAL_SECONDS = 0.8
MAX_SECONDS = 30.0
FACTOR = 2.0
JITTER = 0.2  # up to +20 %, then capped: the cap is a promise, not a suggestion.


def backoff_delay(failures: int, *, rng: random.Random | None = None) -> float:
    """The wait after `failures` consecutive failures (1 for the first)."""
    if failures < 1:
        return 0.0
    base = min(INITIAL_SECONDS * FACTOR ** min(failures - 1, 64), MAX_SECONDS)
    spread = (rng or random).uniform(0.0, JITTER)
    return min(base * (1.0 + spread), MAX_SECONDS)
