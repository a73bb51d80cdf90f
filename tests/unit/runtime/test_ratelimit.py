"""Retry-delay calculators: exact tables plus properties (monotone, capped)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.clock import ManualClock
from runtime.workqueue import (
    DEFAULT_MAX_DELAY,
    ItemExponential,
    MaxOf,
    TokenBucket,
    default_controller_rate_limiter,
)


def test_item_exponential_table_doubles_from_5ms_to_the_1000s_cap() -> None:
    limiter = ItemExponential()
    delays = [limiter.when("a") for _ in range(22)]
    expected_uncapped = [0.005 * 2**n for n in range(18)]  # 5 ms .. 655.36 s
    assert delays[:18] == pytest.approx(expected_uncapped)
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0] * 4  # 1310.72 s would pass the cap
    assert limiter.num_requeues("a") == 22


def test_item_exponential_counts_items_separately_and_forget_resets_one() -> None:
    limiter = ItemExponential(base=1, cap=100)
    assert [limiter.when("a") for _ in range(3)] == [1, 2, 4]
    assert limiter.when("b") == 1
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.num_requeues("b") == 1
    assert limiter.when("a") == 1


def test_token_bucket_allows_the_burst_then_ten_per_second() -> None:
    clock = ManualClock()
    bucket = TokenBucket(clock)  # 10/s, burst 100
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    # Tokens are booked ahead: the k-th call beyond the burst waits k/10 s.
    assert [bucket.when(i) for i in range(100, 105)] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    clock.advance(0.5)  # refills the 5 tokens booked ahead
    assert bucket.when("x") == pytest.approx(0.1)
    clock.advance(1000)
    # The bucket never holds more than the burst.
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    assert bucket.when("y") == pytest.approx(0.1)
    assert bucket.num_requeues("y") == 0


def test_default_limiter_is_the_max_of_both() -> None:
    clock = ManualClock()
    limiter = default_controller_rate_limiter(clock)
    # Within the burst, the per-item delay rules.
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    for i in range(97):
        limiter.when(f"other-{i}")
    # Burst exhausted: the bucket's 0.1 s beats the new item's 5 ms.
    assert limiter.when("b") == pytest.approx(0.1)
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_max_of_counts_the_try_in_every_limiter() -> None:
    a, b = ItemExponential(base=1, cap=10), ItemExponential(base=3, cap=10)
    limiter = MaxOf(a, b)
    assert limiter.when("k") == 3
    assert (a.num_requeues("k"), b.num_requeues("k")) == (1, 1)
    assert limiter.when("k") == 6


@given(
    base=st.floats(min_value=1e-4, max_value=10),
    cap=st.floats(min_value=10, max_value=1e5),
    n=st.integers(min_value=1, max_value=200),
)
def test_item_exponential_is_monotone_and_capped(base: float, cap: float, n: int) -> None:
    limiter = ItemExponential(base=base, cap=cap)
    delays = [limiter.when("k") for _ in range(n)]
    assert delays[0] == base
    assert all(x <= y for x, y in itertools.pairwise(delays))
    assert all(d <= cap for d in delays)
    # It reaches the cap as soon as doubling passes it, and stays there.
    assert all(d == cap for d in delays if d >= cap)
    assert limiter.num_requeues("k") == n


@given(
    steps=st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=300),
    rate=st.floats(min_value=0.5, max_value=50),
    burst=st.integers(min_value=1, max_value=20),
)
def test_token_bucket_never_exceeds_its_rate(steps: list[float], rate: float, burst: int) -> None:
    clock = ManualClock()
    bucket = TokenBucket(clock, rate=rate, burst=burst)
    start = clock.monotonic()
    release_times = []
    for step in steps:
        clock.advance(step)
        delay = bucket.when("k")
        assert delay >= 0
        release_times.append(clock.monotonic() + delay)
    # Over any span ending at the i-th release, at most burst + rate * span tries run.
    for i, end in enumerate(release_times):
        released = sum(1 for t in release_times[: i + 1] if t <= end)
        assert released <= burst + rate * (end - start) + 1e-6


@given(n=st.integers(min_value=1, max_value=300))
def test_default_limiter_is_capped_at_1000s(n: int) -> None:
    clock = ManualClock()
    limiter = default_controller_rate_limiter(clock)
    delays = [limiter.when("k") for _ in range(n)]
    assert all(0 <= d <= DEFAULT_MAX_DELAY for d in delays)
    assert all(x <= y for x, y in itertools.pairwise(delays))
