"""Go duration strings and RFC 3339 times, as Kubernetes writes them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.core.basics.timefmt import (
    TimeFormatError,
    format_duration,
    parse_duration,
    parse_time,
)

DURATIONS = [
    ("90s", 90.0),
    ("30m", 1800.0),
    ("1h30m", 5400.0),
    ("1h0m0s", 3600.0),
    ("1.5h", 5400.0),
    (".5s", 0.5),
    ("1.s", 1.0),
    ("500ms", 0.5),
    ("2us", 2e-6),
    ("2µs", 2e-6),
    ("3ns", 3e-9),
    ("1m30s500ms", 90.5),
    ("0", 0.0),
    ("0s", 0.0),
    ("168h", 604800.0),
    ("2562047h", 9223369200.0),
]


@pytest.mark.parametrize(("text", "seconds"), DURATIONS)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "5",
        "1d",
        "-1s",
        "+1s",
        "1h 30m",
        "h",
        "1.2.3s",
        "1H",
        "1hour",
        "00",
        "2562048h",
        " 5m",
        "\u0663s",
    ],
)
def test_not_go_durations(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45, "45s"), (120, "2m"), (5400, "1h30m"), (3661, "1h1m1s")]
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


INSTANT = datetime(2026, 5, 4, 10, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2026-05-04T10:20:00Z",
        "2026-05-04T10:20:00z",
        "2026-05-04T10:20:00.000000Z",
        "2026-05-04T12:20:00+02:00",
        "2026-05-04T05:20:00-05:00",
        "2026-05-04T10:20:00.000000000Z",  # Go's RFC3339Nano
    ],
)
def test_rfc3339_times(text: str) -> None:
    parsed = parse_time(text)
    assert parsed == INSTANT
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "value",
    [
        "",
        "yesterday",
        "2026-05-04T10:20:00",
        "2026-05-04",
        "2026-13-01T00:00:00Z",
        17,
        None,
        # ISO 8601 forms that fromisoformat takes but RFC 3339 does not.
        "20260504T102000Z",
        "2026-W19-1T10:20:00Z",
        "2026-05-04T10Z",
        " 2026-05-04T10:20:00Z",
        "\u0662026-05-04T10:20:00Z",
        # Out of datetime's range once in UTC: an error, not an OverflowError.
        "9999-12-31T23:00:00-05:00",
    ],
)
def test_not_rfc3339_times(value: object) -> None:
    with pytest.raises(TimeFormatError):
        parse_time(value)
