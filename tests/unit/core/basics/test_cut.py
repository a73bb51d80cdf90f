"""Long values cut from what the runner prints, after the redaction: examples, and
properties of the two together over any text in any chunks (exact accounting of what was
cut, no value kept, no marker split, lines bounded)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.cut import LINE_BYTES, VALUE_BYTES, StreamCutter, cut_marker
from controller.core.basics.redact import MIN_LENGTH, REDACTED, StreamRedactor, redactor

CUT = re.compile(rb"\.\.\. \((\d+) bytes cut\)")


def printed(text: bytes, cutter: StreamCutter | None = None) -> bytes:
    cutter = cutter or StreamCutter()
    return cutter.feed(text) + cutter.flush()


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        # An update's diff: both values cut, the arrow and the quotes kept.
        (
            b'  ~ content = "' + b"a" * 10_000 + b'" -> "' + b"b" * 5000 + b'"\n',
            b'  ~ content = "'
            + b"a" * 4096
            + cut_marker(5904)
            + b'" -> "'
            + b"b" * 4096
            + cut_marker(904)
            + b'"\n',
        ),
        # Escapes are skipped over (an escaped quote does not close the string) and are
        # kept whole or not at all.
        (
            b'x = "' + b"a" * 4095 + b'\\"' + b"c" * 10 + b'"\n',
            b'x = "' + b"a" * 4095 + cut_marker(12) + b'"\n',
        ),
        # A cut ends after a redaction marker, never inside it.
        (
            b'x = "' + b"a" * 4090 + REDACTED.encode() + b"z" * 100 + b'"\n',
            b'x = "' + b"a" * 4090 + REDACTED.encode() + cut_marker(100) + b'"\n',
        ),
        # ...nor inside a UTF-8 character.
        (
            b'x = "' + b"a" * 4095 + "é".encode() * 10 + b'"\n',
            b'x = "' + b"a" * 4095 + "é".encode() + cut_marker(18) + b'"\n',
        ),
        # A long value OpenTofu does not quote: the line is cut.
        (b"  " + b"z" * 20_000 + b"\n", b"  " + b"z" * (LINE_BYTES - 2) + cut_marker(3618) + b"\n"),
        # An unclosed string ends with its line, and the next line is whole.
        (
            b'Error: "' + b"q" * 5000 + b'\nnext "line"\n',
            b'Error: "' + b"q" * 4096 + cut_marker(904) + b'\nnext "line"\n',
        ),
        # A heredoc's lines are one value: cut to the closing line, which is printed.
        (
            b"  + input = <<-EOT\n" + (b'      "' + b"h" * 1000 + b"\n") * 10 + b"    EOT\nnext\n",
            b"  + input = <<-EOT\n"
            + (b'      "' + b"h" * 1000 + b"\n") * 4
            + b'      "'
            + b"h" * (4096 - 4 * 1007 - 7)
            # Left out: the ten lines and the nine newlines between them, less the 4096
            # bytes and four newlines printed.
            + cut_marker(10 * 1007 + 9 - 4096 - 4)
            + b"\n    EOT\nnext\n",
        ),
        (
            b"  ~ output = <<-EOT\n" + b"e" * 5000 + b"\nEOT -> (known after apply)\n",
            b"  ~ output = <<-EOT\n"
            + b"e" * 4096
            + cut_marker(904)
            + b"\nEOT -> (known after apply)\n",
        ),
        # What is short is printed as it is, quotes and all.
        (
            b'  + name = "web" -> "db" \\" unbalanced "\n',
            b'  + name = "web" -> "db" \\" unbalanced "\n',
        ),
        # The end of the stream closes an open cut.
        (b'tail = "' + b"t" * 5000, b'tail = "' + b"t" * 4096 + cut_marker(904)),
    ],
)
def test_long_values_are_cut_saying_how_much(line: bytes, shown: bytes) -> None:
    assert printed(line) == shown
    one_by_one = StreamCutter()
    parts = b"".join(one_by_one.feed(line[i : i + 1]) for i in range(len(line)))
    assert parts + one_by_one.flush() == shown


def test_ten_mebibytes_before_and_after_print_as_eight_kibibytes() -> None:
    value = b"v" * (10 << 20)
    diff = b'      ~ content = "' + value + b'" -> "' + value + b'w"\n'
    cutter = StreamCutter()
    out = b"".join(cutter.feed(diff[i : i + 65536]) for i in range(0, len(diff), 65536))
    out += cutter.flush()
    assert len(out) < 2 * VALUE_BYTES + 100
    assert [int(n) for n in CUT.findall(out)] == [(10 << 20) - 4096, (10 << 20) + 1 - 4096]


# Small limits, so that hypothesis reaches them; the text has no `(`, `)` or `.`, so every
# one in the output is a marker's.
VALUE, LINE = 8, 40
TEXT = st.lists(
    st.sampled_from(["a", "b", "c", "=", "/", " ", '"', "\\", "\n", "x", "<<-EOT\n", "  EOT"]),
    max_size=200,
).map("".join)
SECRETS = st.lists(st.text("abc=/", min_size=MIN_LENGTH, max_size=12), min_size=1, max_size=3)
CHUNKS = st.lists(st.integers(0, 400), max_size=12)


class SmallHold(StreamRedactor):
    HOLD_LIMIT = 16


def _runner_prints(secrets: list[str], data: bytes, cuts: list[int]) -> bytes:
    """What the runner prints of `data` arriving in the chunks `cuts` makes: redacted as
    it streams, then cut (controller/runner/tofu.py)."""
    redacting, cutting = SmallHold(redactor(secrets)), StreamCutter(VALUE, LINE)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    out = [cutting.feed(redacting.feed(data[a:b])) for a, b in itertools.pairwise(bounds)]
    return b"".join(out) + cutting.feed(redacting.flush()) + cutting.flush()


@given(secrets=SECRETS, text=TEXT, cuts=CHUNKS)
def test_what_is_printed_is_the_redacted_text_less_exactly_the_cuts_it_names(
    secrets: list[str], text: str, cuts: list[int]
) -> None:
    data = text.encode()
    out = _runner_prints(secrets, data, cuts)
    # However the output came in chunks, the same is printed.
    assert out == _runner_prints(secrets, data, [])
    # Walking the redacted text: each printed piece is next in it, and each marker
    # stands for exactly the bytes skipped there. Nothing is added, moved or lost.
    redacted = redactor(secrets).data(data)
    at, pieces = 0, CUT.split(out)
    for piece, count in itertools.zip_longest(pieces[::2], pieces[1::2]):
        assert redacted.startswith(piece, at)
        at += len(piece) + int(count or 0)
    assert at == len(redacted)


def _value_sizes(out: bytes) -> list[int]:
    """The bytes printed of each value in `out`, its cut markers aside: each quoted
    string's (an escape counts two) and each heredoc's lines' (newlines aside)."""
    sizes: list[int] = []
    block: int | None = None
    for line in CUT.sub(b"", out).split(b"\n"):
        if block is not None and not line.lstrip(b" ").startswith(b"EOT"):
            block += len(line)
            continue
        if block is not None:
            sizes.append(block)
            block = None
        string: int | None = None
        escaped = False
        for byte in line:
            if string is None:
                string = 0 if byte == ord('"') else None
            elif escaped or byte == ord("\\"):
                string, escaped = string + 1, not escaped
            elif byte == ord('"'):
                sizes.append(string)
                string = None
            else:
                string += 1
        sizes += [] if string is None else [string]
        block = 0 if line.endswith(b"<<-EOT") else None
    return sizes + ([] if block is None else [block])


@given(secrets=SECRETS, text=TEXT, cuts=CHUNKS)
@settings(max_examples=1000)
def test_no_value_is_printed_longer_than_the_limit(
    secrets: list[str], text: str, cuts: list[int]
) -> None:
    out = _runner_prints(secrets, text.encode(), cuts)
    # A redaction marker the room ran out in is printed whole: at most 9 bytes more.
    assert all(size < VALUE + len(REDACTED) for size in _value_sizes(out))


@given(secrets=SECRETS, text=TEXT, cuts=CHUNKS)
def test_no_cut_keeps_part_of_a_value_or_splits_a_marker(
    secrets: list[str], text: str, cuts: list[int]
) -> None:
    out = _runner_prints(secrets, text.encode(), cuts)
    bare = CUT.sub(b"\1", out).replace(REDACTED.encode(), b"\0")
    # A marker split by a cut would leave a `(` or `)` behind.
    assert not set(bare) & set(b"().")
    for secret in secrets:
        assert secret.encode() not in bare
    for line in out.split(b"\n"):
        # Room for one more marker, and a redaction marker the cut ran to the end of.
        assert len(line) <= LINE + len(cut_marker(400)) + len(REDACTED)


@given(text=st.text('abc=/ "\\xy', max_size=VALUE))
def test_a_line_no_longer_than_a_value_is_printed_as_it_is(text: str) -> None:
    line = text.encode() + b"\n"
    assert printed(line, StreamCutter(VALUE, LINE)) == line


# Every `(` of these is a redaction marker's.
PIECES = st.sampled_from(
    ["a", "b", " ", '"', "\\", "\n", "é", "€", REDACTED, "<<-EOT\n", " EOT", "EOT\n"]
)


@given(pieces=st.lists(PIECES, max_size=200), cuts=CHUNKS)
def test_the_cutter_prints_the_same_in_any_chunks_and_splits_no_marker_or_character(
    pieces: list[str], cuts: list[int]
) -> None:
    data = "".join(pieces).encode()
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    cutter = StreamCutter(VALUE, LINE)
    out = b"".join(cutter.feed(data[a:b]) for a, b in itertools.pairwise(bounds))
    out += cutter.flush()
    assert out == printed(data, StreamCutter(VALUE, LINE))
    out.decode()  # every character whole
    assert b"(" not in CUT.sub(b"", out).replace(REDACTED.encode(), b"")


@pytest.mark.parametrize(
    ("tail", "shown"),
    [
        # A marker's start that is no marker: printed as far as it matches.
        (b"(rex" + b"y" * 20, b"(re"),
        (b"(redacted)" + b"y" * 20, b"(redacted)"),
        (b"\xe2\x82\xac" * 3, "\N{EURO SIGN}".encode()),
    ],
)
def test_what_the_room_ran_out_in_is_finished_as_far_as_it_goes(tail: bytes, shown: bytes) -> None:
    line = b'"' + b"a" * (VALUE - 1) + tail + b'"\n'
    cut = len(tail) - len(shown)
    assert printed(line, StreamCutter(VALUE, LINE)) == (
        b'"' + b"a" * (VALUE - 1) + shown + cut_marker(cut) + b'"\n'
    )
