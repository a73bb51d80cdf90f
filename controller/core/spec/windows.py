"""Weekly change windows in a time zone.

Ops that change infrastructure start only inside a window. A window is a
weekday set, a local start time and a duration; it opens at that wall-clock
time in its zone (DST included) and lasts the duration in real time."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from controller.core.basics.timefmt import TimeFormatError, parse_duration

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_START = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
# A weekly window longer than a week would always be open; refuse it as a mistake.
_MAX_DURATION = 7 * 24 * 3600.0


class WindowError(ValueError):
    """A change window that cannot be read."""


@dataclass(frozen=True)
class Window:
    days: frozenset[int]  # weekday numbers, Monday = 0
    hour: int
    minute: int
    duration: timedelta
    zone: ZoneInfo

    def openings(self, around: datetime, span_days: int = 8) -> list[tuple[datetime, datetime]]:
        """Every (open, close) of this window whose local date is within span_days of `around`."""
        local_day = around.astimezone(self.zone).date()
        spans = []
        for offset in range(-span_days, span_days + 1):
            day = local_day + timedelta(days=offset)
            if day.weekday() in self.days:
                opens = self._opens_on(day)
                spans.append((opens, opens + self.duration))
        return spans

    def _opens_on(self, day: date) -> datetime:
        local = datetime(day.year, day.month, day.day, self.hour, self.minute, tzinfo=self.zone)
        return local.astimezone(UTC)


def parse_windows(raw: list[Any] | None) -> list[Window]:
    return [_parse_window(item, i) for i, item in enumerate(raw or [])]


def _parse_window(item: Any, index: int) -> Window:
    where = f"changeWindows[{index}]"
    if not isinstance(item, dict):
        raise WindowError(f"{where} is not an object")
    match = _START.match(str(item.get("start", "")))
    if match is None:
        raise WindowError(f"{where}.start must be HH:MM, got {item.get('start')!r}")
    try:
        seconds = parse_duration(str(item.get("duration", "")))
    except TimeFormatError as err:
        raise WindowError(f"{where}.duration: {err}") from None
    if not 0 < seconds <= _MAX_DURATION:
        raise WindowError(f"{where}.duration must be more than 0 and at most 168h")
    days = item.get("days") or list(DAYS)
    if not isinstance(days, list):
        raise WindowError(f"{where}.days must be a list of days, got {days!r}")
    unknown = [d for d in days if not isinstance(d, str) or d not in DAYS]
    if unknown:
        raise WindowError(f"{where}.days: unknown day(s) {unknown}; use {', '.join(DAYS)}")
    return Window(
        days=frozenset(DAYS.index(d) for d in days),
        hour=int(match.group(1)),
        minute=int(match.group(2)),
        duration=timedelta(seconds=seconds),
        zone=_zone(str(item.get("timeZone") or "UTC"), where),
    )


def _zone(name: str, where: str) -> ZoneInfo:
    """The zone called `name`. Loading reads a file of the time-zone database, so the ways
    it fails are many: a folder of the database (`America/Indiana`, `Etc`) raises
    IsADirectoryError, a data file that is no zone (`zone.tab`) ValueError, an unreadable
    one OSError. The CRD's pattern admits all of them; every one is an invalid policy,
    never a crash of the decision."""
    try:
        return ZoneInfo(name)
    except ZoneInfoNotFoundError:
        raise WindowError(f"{where}.timeZone: unknown time zone {name!r}") from None
    except IsADirectoryError:
        raise WindowError(
            f"{where}.timeZone: {name!r} is a folder of the time-zone database, not a zone"
        ) from None
    except Exception as err:  # any load error: the zone is unusable, whatever the cause
        raise WindowError(
            f"{where}.timeZone: time zone {name!r} cannot be loaded ({type(err).__name__})"
        ) from None


def open_window(windows: list[Window], at: datetime) -> tuple[datetime, datetime] | None:
    """The window open at `at` that closes last, or None when all are shut."""
    spans = [s for w in windows for s in w.openings(at) if s[0] <= at < s[1]]
    return max(spans, key=lambda s: s[1]) if spans else None


def next_opening(windows: list[Window], at: datetime) -> datetime | None:
    """`at` itself inside a window, else the earliest opening after it; None without windows."""
    if not windows:
        return None
    if open_window(windows, at) is not None:
        return at
    starts = [s[0] for w in windows for s in w.openings(at) if s[0] > at]
    return min(starts) if starts else None
