"""Weekly change windows: when one is open, and when the next one opens (DST included)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.core.spec.windows import WindowError, next_opening, open_window, parse_windows
from runtime.jsonobj import Json


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


WEEKNIGHTS: list[Json] = [
    {"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "start": "22:00", "duration": "2h"}
]
TWO: list[Json] = [
    {"days": ["Tue"], "start": "02:00", "duration": "1h"},
    {"days": ["Thu"], "start": "14:00", "duration": "30m"},
]
OVERLAP: list[Json] = [
    {"start": "09:00", "duration": "2h"},
    {"days": ["Mon"], "start": "10:00", "duration": "4h"},
]
BERLIN_9: list[Json] = [{"start": "09:00", "duration": "1h", "timeZone": "Europe/Berlin"}]
BERLIN_GAP: list[Json] = [
    {"days": ["Sun"], "start": "02:30", "duration": "1h", "timeZone": "Europe/Berlin"}
]
NEW_YORK: list[Json] = [
    {"days": ["Sun"], "start": "01:30", "duration": "1h", "timeZone": "America/New_York"}
]

# (case, windows, at, the window open at `at` or None, the next opening from `at`).
# 2026-05-04 is a Monday. Europe/Berlin: CET (+1) until 2026-03-29 02:00, CEST (+2)
# until 2026-10-25 03:00. America/New_York: EDT (-4) until 2026-11-01 02:00, then EST.
CASES: list[tuple[str, list[Json], str, tuple[str, str] | None, str | None]] = [
    ("before a weeknight window", WEEKNIGHTS, "2026-05-04T21:59:59Z", None, "2026-05-04T22:00:00Z"),
    (
        "at the opening instant",
        WEEKNIGHTS,
        "2026-05-04T22:00:00Z",
        ("2026-05-04T22:00:00Z", "2026-05-05T00:00:00Z"),
        "2026-05-04T22:00:00Z",
    ),
    (
        "past midnight, still the Monday window",
        WEEKNIGHTS,
        "2026-05-04T23:59:59Z",
        ("2026-05-04T22:00:00Z", "2026-05-05T00:00:00Z"),
        "2026-05-04T23:59:59Z",
    ),
    (
        "the closing instant is outside",
        WEEKNIGHTS,
        "2026-05-05T00:00:00Z",
        None,
        "2026-05-05T22:00:00Z",
    ),
    (
        "Friday's window runs into Saturday",
        WEEKNIGHTS,
        "2026-05-08T23:30:00Z",
        ("2026-05-08T22:00:00Z", "2026-05-09T00:00:00Z"),
        "2026-05-08T23:30:00Z",
    ),
    (
        "days filter: weekend skipped",
        WEEKNIGHTS,
        "2026-05-09T12:00:00Z",
        None,
        "2026-05-11T22:00:00Z",
    ),
    ("two windows: the earlier next", TWO, "2026-05-05T05:00:00Z", None, "2026-05-07T14:00:00Z"),
    (
        "two windows: inside the first",
        TWO,
        "2026-05-05T02:59:00Z",
        ("2026-05-05T02:00:00Z", "2026-05-05T03:00:00Z"),
        "2026-05-05T02:59:00Z",
    ),
    ("two windows: wraps to next week", TWO, "2026-05-07T15:00:00Z", None, "2026-05-12T02:00:00Z"),
    (
        "overlapping windows: the one closing last",
        OVERLAP,
        "2026-05-04T10:30:00Z",
        ("2026-05-04T10:00:00Z", "2026-05-04T14:00:00Z"),
        "2026-05-04T10:30:00Z",
    ),
    ("zone in winter: 09:00 CET", BERLIN_9, "2026-03-28T07:59:00Z", None, "2026-03-28T08:00:00Z"),
    (
        "zone after spring forward: 09:00 CEST",
        BERLIN_9,
        "2026-03-28T09:00:00Z",
        None,
        "2026-03-29T07:00:00Z",
    ),
    (
        "zone after fall back: 09:00 CET",
        BERLIN_9,
        "2026-10-24T08:00:00Z",
        None,
        "2026-10-25T08:00:00Z",
    ),
    (
        "zone: the window lasts its duration in real time",
        BERLIN_9,
        "2026-03-29T07:59:59Z",
        ("2026-03-29T07:00:00Z", "2026-03-29T08:00:00Z"),
        "2026-03-29T07:59:59Z",
    ),
    # 02:30 does not exist on 2026-03-29 in Berlin: read with the offset before the jump
    # (CET), it is 01:30Z, which the clocks show as 03:30 CEST.
    (
        "start in the spring-forward gap",
        BERLIN_GAP,
        "2026-03-29T00:00:00Z",
        None,
        "2026-03-29T01:30:00Z",
    ),
    # 02:30 happens twice on 2026-10-25 in Berlin: the first (CEST) is taken.
    (
        "start in the fall-back repeat",
        BERLIN_GAP,
        "2026-10-24T12:00:00Z",
        None,
        "2026-10-25T00:30:00Z",
    ),
    ("New York, Sunday 01:30 EDT", NEW_YORK, "2026-10-26T00:00:00Z", None, "2026-11-01T05:30:00Z"),
]


@pytest.mark.parametrize(
    ("windows", "at", "open_now", "opens"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_windows(
    windows: list[Json], at: str, open_now: tuple[str, str] | None, opens: str | None
) -> None:
    parsed = parse_windows(windows)
    expected_open = (z(open_now[0]), z(open_now[1])) if open_now else None
    assert open_window(parsed, z(at)) == expected_open
    assert next_opening(parsed, z(at)) == (z(opens) if opens else None)


def test_no_windows_means_no_gate() -> None:
    assert parse_windows(None) == []
    assert next_opening([], z("2026-05-04T00:00:00Z")) is None


@pytest.mark.parametrize(
    ("window", "says"),
    [
        ({"start": "24:00", "duration": "1h"}, "start"),
        ({"start": "9:00", "duration": "1h"}, "start"),
        ({"start": "09:00", "duration": "0s"}, "more than 0"),
        ({"start": "09:00", "duration": "169h"}, "at most 168h"),
        ({"start": "09:00", "duration": "1 hour"}, "duration"),
        ({"start": "09:00", "duration": "1h", "days": ["Monday"]}, "unknown day"),
        ({"start": "09:00", "duration": "1h", "timeZone": "Mars/Olympus"}, "time zone"),
        ("09:00-10:00", "not an object"),
    ],
)
def test_bad_windows_are_refused(window: object, says: str) -> None:
    with pytest.raises(WindowError, match=says):
        parse_windows([window])
