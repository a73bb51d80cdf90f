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
from collections.abc import Iterable
from functools import lru_cache
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


class Redactor:
    """Replaces every form of a fixed set of values; one with no values changes nothing."""

    def __init__(self, patterns: frozenset[str]) -> None:
        # Longest first: a regex alternation takes the first alternative that matches.
        ordered = sorted(patterns, key=lambda p: (-len(p), p))
        self.longest = len(ordered[0].encode()) if ordered else 0
        self._text = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        escaped = [re.escape(p.encode()) for p in ordered]
        self._bytes = re.compile(b"|".join(escaped)) if ordered else None

    def __bool__(self) -> bool:
        return self._text is not None

    def text(self, text: str) -> str:
        return self._text.sub(REDACTED, text) if self._text is not None else text

    def data(self, data: bytes) -> bytes:
        return self._bytes.sub(REDACTED.encode(), data) if self._bytes is not None else data

    def safe_cut(self, data: bytes, cut: int) -> int:
        """The end of the prefix of `data` that can be redacted and released now, when the
        rest may still be continued: `cut` moved past any value that starts before it.

        With `cut` at least `longest - 1` bytes before the end, every value starting
        before `cut` lies whole within `data`, so none is split across releases."""
        if self._bytes is None:
            return cut
        for match in self._bytes.finditer(data):
            if match.start() >= cut:
                break
            cut = max(cut, match.end())
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
