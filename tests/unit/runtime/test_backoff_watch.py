"""The reflector's reconnect delay."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from runtime.cache.backoff import INITIAL_SECONDS, MAX_SECONDS, backoff_delay


def test_no_failure_no_wait() -> None:
    assert backoff_delay(0) == 0.0


@given(st.integers(min_value=1, max_value=10_000), st.integers())
def test_delays_stay_between_0_8_and_30_seconds(failures: int, seed: int) -> None:
    delay = backoff_delay(failures, rng=random.Random(seed))
    assert INITIAL_SECONDS <= delay <= MAX_SECONDS


@given(st.integers(min_value=1, max_value=40), st.integers())
def test_delays_never_shrink_as_failures_accumulate(failures: int, seed: int) -> None:
    # Jitter is at most +20 %, doubling is +100 %: the next base beats this one's jitter.
    this = backoff_delay(failures, rng=random.Random(seed))
    lower_bound_next = min(INITIAL_SECONDS * 2.0**failures, MAX_SECONDS)
    assert this <= lower_bound_next


def test_jitter_spreads_reconnects() -> None:
    rng = random.Random(1)
    assert len({backoff_delay(3, rng=rng) for _ in range(20)}) == 20
