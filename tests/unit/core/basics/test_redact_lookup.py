"""A Redactor of many values (more patterns than REGEX_PATTERNS_MAX) looks its patterns up
by length instead of compiling one alternation: the same result, leftmost and longest
first, and built in time linear in the values (one alternation of 240,000 forms took
11 s to compile, on the event loop every object shares)."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics import redact
from controller.core.basics.redact import REDACTED, Redactor

ALPHABET = "ab/=%é\n"
PATTERNS = st.frozensets(st.text(ALPHABET, min_size=1, max_size=6), min_size=1, max_size=12)
TEXT = st.text(ALPHABET, max_size=60)


def _both(patterns: frozenset[str]) -> tuple[Redactor, Redactor]:
    regex = Redactor(patterns)
    saved = redact.REGEX_PATTERNS_MAX
    redact.REGEX_PATTERNS_MAX = 0
    try:
        lookup = Redactor(patterns)
    finally:
        redact.REGEX_PATTERNS_MAX = saved
    return regex, lookup


@given(PATTERNS, TEXT, st.integers(min_value=0, max_value=60))
def test_the_lookup_finds_what_the_alternation_finds(
    patterns: frozenset[str], text: str, cut: int
) -> None:
    regex, lookup = _both(patterns)
    assert lookup.text(text) == regex.text(text)
    data = text.encode()
    assert lookup.data(data) == regex.data(data)
    assert lookup.safe_cut(data, cut) == regex.safe_cut(data, cut)
    assert lookup.longest == regex.longest


def test_many_values_are_redacted_and_built_in_linear_time() -> None:
    values = [f"tok{i:07d}" for i in range(80_000)]
    started = time.process_time()
    many = redact.redactor(values)
    spent = time.process_time() - started
    assert many.text("a tok0012345 b tok0079999.") == f"a {REDACTED} b {REDACTED}."
    # Measured 0.6 s here; the alternation it replaces took 11 s.
    assert spent < 4.0, spent
