"""Kubernetes time formats: RFC 3339 timestamps and Go duration strings."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}

# Go's time.Duration is an int64 of nanoseconds: about 292 years at most.
_MAX_DURATION = (2**63 - 1) / 1e9


class TimeFormatError(ValueError):
    """A timestamp or duration that cannot be read."""


_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"(?P<zone>[Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


def parse_time(value: object) -> datetime:
    """An RFC 3339 timestamp as Kubernetes writes it, as an aware UTC datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        raise TimeFormatError(f"not an RFC 3339 time: {value!r}")
    # fromisoformat alone takes more of ISO 8601 than RFC 3339 allows (week dates,
    # basic format, hours without minutes), so the shape is checked first.
    shape = _RFC3339.fullmatch(value)
    if shape is None:
        raise TimeFormatError(f"not an RFC 3339 time: {value!r}")
    if shape.group("zone") is None:
        raise TimeFormatError(f"RFC 3339 time without a zone: {value!r}")
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except (ValueError, OverflowError):  # a day or hour out of range; past year 9999
        raise TimeFormatError(f"not an RFC 3339 time: {value!r}") from None


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a Z, whole seconds: the metav1.Time wire format."""
    return value.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(value: str) -> float:
    """A Go duration string (`90s`, `1h30m`, `1.5h`) in seconds; negative not allowed."""
    text = value if isinstance(value, str) else ""
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None:
            raise TimeFormatError(f"not a Go duration: {value!r}")
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0:
        raise TimeFormatError(f"not a Go duration: {value!r}")
    if total > _MAX_DURATION:
        raise TimeFormatError(f"Go duration out of range (at most 2562047h): {value!r}")
    return total


def format_duration(seconds: float) -> str:
    """Seconds as a short Go-style duration, for messages (`2m`, `1h30m`, `45s`)."""
    whole = max(round(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts) or "0s"


def format_micro(t: datetime) -> str:
    """A MicroTime (Lease times): RFC 3339 in UTC with microseconds."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
