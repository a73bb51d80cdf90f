"""The redaction rule: which forms of a value are removed, the length floor, and the
stream redactor agreeing with the whole-text one however the output is chunked."""

from __future__ import annotations

import base64
import itertools
import json
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.redact import MIN_LENGTH, REDACTED, StreamRedactor, forms, redactor

SECRET = "s3cr3t/p@ss+word=="
QUOTED = 'say "hi"'
PEM = "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("printed", "expected"),
    [
        (f"token={SECRET}", f"token={REDACTED}"),
        (f"b64 {_b64(SECRET)}", f"b64 {REDACTED}"),
        (f"b64 {_b64(SECRET).rstrip('=')}!", f"b64 {REDACTED}!"),
        (f"u {base64.urlsafe_b64encode(SECRET.encode()).decode()}", f"u {REDACTED}"),
        (f"?p={quote(SECRET, safe='')}&", f"?p={REDACTED}&"),
        (f"?p={quote(SECRET, safe='').lower()}&", f"?p={REDACTED}&"),
        (f"form {quote_plus('a secret value')}", f"form {REDACTED}"),
        ('{"v": ' + json.dumps(QUOTED) + "}", f'{{"v": "{REDACTED}"}}'),
        ("line MIIBOgIBAAJBAKj34GkxFhD9 alone", f"line {REDACTED} alone"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_a_value_and_its_encodings_are_removed(printed: str, expected: str) -> None:
    rule = redactor([SECRET, "a secret value", QUOTED, PEM])
    assert rule.text(printed) == expected
    assert rule.data(printed.encode()) == expected.encode()


@pytest.mark.parametrize("short", ["1", "no", "eu1"])
def test_values_below_the_floor_are_left_alone(short: str) -> None:
    assert len(short) < MIN_LENGTH
    assert forms(short) == set()
    text = f"region {short} zone 1 no"
    assert redactor([short]).text(text) == text


def test_a_value_containing_another_is_removed_whole() -> None:
    assert redactor(["abcd", "abcdefgh"]).text("xabcdefghx abcd") == f"x{REDACTED}x {REDACTED}"


def test_no_values_change_nothing() -> None:
    rule = redactor([])
    assert not rule
    assert rule.text("anything") == "anything"


values = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\0\n"), min_size=MIN_LENGTH
)


@given(secrets=st.lists(values, min_size=1, max_size=3), noise=st.lists(st.text(), max_size=4))
def test_no_value_survives_in_any_text(secrets: list[str], noise: list[str]) -> None:
    text = "".join(n + s for n, s in zip(noise + [""] * 3, secrets, strict=False)) + "".join(noise)
    # The marker becomes a character no value holds, so only the text around it is searched.
    out = redactor(secrets).text(text).replace(REDACTED, "\0")
    for secret in secrets:
        assert secret not in out


class SmallHold(StreamRedactor):
    HOLD_LIMIT = 16


@given(
    secrets=st.lists(st.text("abc=/", min_size=MIN_LENGTH, max_size=12), min_size=1, max_size=3),
    text=st.text("abc=/\n xy", max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=12),
)
def test_a_stream_in_any_chunks_is_redacted_as_the_whole(
    secrets: list[str], text: str, cuts: list[int]
) -> None:
    rule = redactor(secrets)
    data = text.encode()
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for stream in (StreamRedactor(rule), SmallHold(rule)):
        out = b"".join(stream.feed(data[a:b]) for a, b in itertools.pairwise(bounds))
        assert out + stream.flush() == rule.data(data)


def test_a_stream_holds_back_only_an_unfinished_line() -> None:
    stream = StreamRedactor(redactor(["hunter22"]))
    assert stream.feed(b"first hunt") == b""
    assert stream.feed(b"er22 line\nsecond") == f"first {REDACTED} line\n".encode()
    assert stream.flush() == b"second"
