"""Removing secret values from text: the one rule the runner and the controller share.

A value is removed as itself and in the encodings a module or a provider is likely
to print it in: base64 (standard and URL-safe, padded or not), URL-encoded (`%2F`
and `%2f`, spaces as `%20` or `+`), JSON-escaped, and, for a value of several lines
(a PEM key), each of its lines. Every occurrence becomes `(redacted)`.

Values shorter than MIN_LENGTH characters are left alone: removing every `1`, `no`
or `eu` from a message destroys it and protects nothing, since a value that short
is guessed in a handful of tries. Encodings and lines of a value follow the same
floor, so the base64 of a short value is not hunted either.

Longer forms are matched first, so a value that contains another is removed whole,
and nothing of a removed value remains around its marker."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "(redacted)"
MIN_LENGTH = 4


def forms(value: str) -> set[str]:
    """The strings that give `value` away: itself and its encodings, each at least
    MIN_LENGTH characters long."""
    if len(value) < MIN_LENGTH:
        return set()
    raw = value.encode()
    found = {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]}
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode()
        found |= {text, text.rstrip("=")}
    for url in (quote(value, safe=""), quote_plus(value, safe="")):
        found |= {url, _lower_escapes(url)}
    if "\n" in value:
        for line in value.splitlines():
            if len(line.strip()) >= MIN_LENGTH:
                found |= forms(line.strip())
    return {form for form in found if len(form) >= MIN_LENGTH}


def _lower_escapes(url: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), url)


# Above this many patterns one regex alternation takes seconds to compile (11 s for the
# 240,000 forms of 80,000 short values, on the event loop every object shares), so the
# patterns are looked up by length instead (`_Lookup`: linear to build).
REGEX_PATTERNS_MAX = 2000


class _Lookup:
    """What a longest-first regex alternation of literals finds, by set lookups: at each
    position, leftmost first, the longest pattern that starts there, then on past it. One
    lookup per distinct pattern length per position."""

    def __init__(self, patterns: Iterable[str] | Iterable[bytes]) -> None:
        by_length: dict[int, set[Any]] = {}
        for pattern in patterns:
            if pattern:  # an empty one would match everywhere and advance nothing
                by_length.setdefault(len(pattern), set()).add(pattern)
        self._sets = sorted(by_length.items(), reverse=True)

    def finditer(self, text: Any) -> Iterator[tuple[int, int]]:
        at, end = 0, len(text)
        while at < end:
            for length, found in self._sets:
                if at + length <= end and text[at : at + length] in found:
                    yield at, at + length
                    at += length
                    break
            else:
                at += 1

    def sub(self, marker: Any, text: Any) -> Any:
        parts, last = [], 0
        for start, stop in self.finditer(text):
            parts += [text[last:start], marker]
            last = stop
        return text[:0].join([*parts, text[last:]]) if parts else text


class _Regex:
    """The same over a compiled alternation, longest first (a regex alternation takes the
    first alternative that matches): fast to run, slow to compile when large."""

    def __init__(self, ordered: list[str] | list[bytes]) -> None:
        self._compiled: re.Pattern[Any] = re.compile(_alternation(ordered))

    def finditer(self, text: Any) -> Iterator[tuple[int, int]]:
        return (match.span() for match in self._compiled.finditer(text))

    def sub(self, marker: Any, text: Any) -> Any:
        return self._compiled.sub(marker, text)


def _alternation(ordered: list[str] | list[bytes]) -> str | bytes:
    if isinstance(ordered[0], str):
        return "|".join(re.escape(str(p)) for p in ordered)
    return b"|".join(re.escape(bytes(p)) for p in ordered)


class Redactor:
    """Replaces every form of a fixed set of values; one with no values changes nothing."""

    def __init__(self, patterns: frozenset[str]) -> None:
        encoded = [p.encode() for p in patterns]
        self.longest = max(map(len, encoded), default=0)
        self._text: _Regex | _Lookup | None = None
        self._bytes: _Regex | _Lookup | None = None
        if patterns and len(patterns) <= REGEX_PATTERNS_MAX:
            ordered = sorted(patterns, key=lambda p: (-len(p), p))
            self._text, self._bytes = _Regex(ordered), _Regex([p.encode() for p in ordered])
        elif patterns:
            self._text, self._bytes = _Lookup(patterns), _Lookup(encoded)

    def __bool__(self) -> bool:
        return self._text is not None

    def text(self, text: str) -> str:
        return str(self._text.sub(REDACTED, text)) if self._text is not None else text

    def data(self, data: bytes) -> bytes:
        if self._bytes is None:
            return data
        return bytes(self._bytes.sub(REDACTED.encode(), data))

    def safe_cut(self, data: bytes, cut: int) -> int:
        """The end of the prefix of `data` that can be redacted and released now, when the
        rest may still be continued: `cut` moved past any value that starts before it.

        With `cut` at least `longest - 1` bytes before the end, every value starting
        before `cut` lies whole within `data`, so none is split across releases."""
        if self._bytes is None:
            return cut
        for start, stop in self._bytes.finditer(data):
            if start >= cut:
                break
            cut = max(cut, stop)
        return cut


@lru_cache(maxsize=1024)
def _compiled(values: frozenset[str]) -> Redactor:
    patterns: set[str] = set()
    for value in values:
        patterns |= forms(value)
    return Redactor(frozenset(patterns))


def redactor(values: Iterable[str]) -> Redactor:
    """The Redactor of `values`; the same set of values shares one compiled Redactor."""
    return _compiled(frozenset(values))


class StreamRedactor:
    """Redacts a byte stream that arrives in arbitrary chunks (a process's output),
    releasing lines as they end and holding back only what a value could still span."""

    # A line longer than this is released in parts, so an endless line cannot hold
    # the log back or grow memory without bound.
    HOLD_LIMIT = 65536

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """What can be released after `chunk`, redacted."""
        if not self._redactor:
            return chunk
        data = self._pending + chunk
        cut = data.rfind(b"\n") + 1
        if len(data) - cut > self.HOLD_LIMIT:
            # Assumes no value contains a newline's worth of the rest: a value that
            # starts before the new cut is whole in `data` (see safe_cut).
            cut = max(cut, len(data) - max(self._redactor.longest - 1, 0))
        cut = self._redactor.safe_cut(data, cut)
        self._pending = data[cut:]
        return self._redactor.data(data[:cut])

    def flush(self) -> bytes:
        """The rest, redacted, at the end of the stream."""
        rest, self._pending = self._pending, b""
        return self._redactor.data(rest)
