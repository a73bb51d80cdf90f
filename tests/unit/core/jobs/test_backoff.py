"""The delay: the seed's table, and its properties for every limit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.jobs.backoff import delay, effective_limit

M = 60.0
# The seed's table: limit -> delay after failure 1..5.
DELAY_TABLE = {
    0: [10 * M, 10 * M, 10 * M, 10 * M, 10 * M],
    1: [10 * M, 10 * M, 10 * M, 10 * M, 10 * M],
    3: [1 * M, 2 * M, 10 * M, 10 * M, 10 * M],
    5: [1 * M, 2 * M, 4 * M, 8 * M, 10 * M],
}


@pytest.mark.parametrize(
    ("limit", "failures", "expected"),
    [(lim, n, row[n - 1]) for lim, row in DELAY_TABLE.items() for n in range(1, 6)],
)
def test_delay_table(limit: int, failures: int, expected: float) -> None:
    assert delay(failures, limit) == expected


def test_no_failures_no_delay() -> None:
    assert delay(0, 3) == 0.0


limits = st.integers(min_value=0, max_value=64)
counts = st.integers(min_value=1, max_value=200)


@given(limits, counts)
def test_delay_never_exceeds_the_cap(limit: int, n: int) -> None:
    assert 0 < delay(n, limit) <= 10 * M


@given(limits, counts)
def test_delay_never_decreases_as_failures_grow(limit: int, n: int) -> None:
    assert delay(n + 1, limit) >= delay(n, limit)


@given(limits, counts)
def test_delay_is_the_cap_once_failures_reach_the_limit(limit: int, n: int) -> None:
    if n >= effective_limit(limit):
        assert delay(n, limit) == 10 * M


@given(st.integers(min_value=-5, max_value=1))
def test_a_limit_of_zero_or_less_behaves_as_one(limit: int) -> None:
    assert effective_limit(limit) == 1
