"""Long values cut from what the runner prints.

OpenTofu prints a value whole, and an update's diff prints it twice (before and after):
an apply of a module with a 10 MiB attribute wrote 31 MiB to its pod log, which log
shippers bill by the byte and keep for months. So the runner's output passes through a
`StreamCutter` after the redaction (controller/core/basics/redact.py):

- a quoted string (OpenTofu prints every one-line string value quoted, with `"` and `\\`
  escaped) keeps its first VALUE_BYTES bytes;
- so do the lines of a heredoc (a string of several lines: `<<-EOT` at the end of a
  line, its lines, and a line starting `EOT`), together;
- a line keeps its first LINE_BYTES bytes (a long value OpenTofu does not quote, or many
  values on one line);

and what is left out becomes `... (N bytes cut)`, N counting exactly the bytes left out;
a string's closing quote and the rest of its line, or a heredoc's closing line, are
printed after it. A cut never
ends inside a redaction marker, a UTF-8 character or an escape: what was begun is
finished first (at most a marker's length more).

The cutter only leaves bytes out and adds markers of its own, after the redaction has
replaced every value it knows: it shows no more of a secret value than the redacted text
does. Its output does not depend on how the stream is chunked. Pure: bytes in, bytes out."""

from __future__ import annotations

import re
from typing import Final

from controller.core.basics.redact import REDACTED

# A value longer than this is cut: a few KiB show what it is (a certificate's head, the
# start of a blob) and keep a diff readable.
VALUE_BYTES: Final = 4096
# Four values at their limit, with their keys, fit on one line.
LINE_BYTES: Final = 16384

_MARKER: Final = REDACTED.encode()
# What changes the state: outside a string, a quote or the line's end; inside, its
# closing quote, an escape, or the line's end.
_IN_TEXT: Final = re.compile(rb'["\n]')
_IN_STRING: Final = re.compile(rb'["\\\n]')
_NEWLINE, _QUOTE, _BACKSLASH = b"\n"[0], b'"'[0], b"\\"[0]
_STRING, _BLOCK, _LINE = "string", "block", "line"
# How OpenTofu opens and closes a string of several lines.
_HEREDOC, _HEREDOC_END = b"<<-EOT", b"EOT"
# A line of a heredoc is held back until its first bytes tell whether it closes it:
# its indentation and three more bytes, at most this many in all.
_HEAD_BYTES: Final = 256


def cut_marker(count: int) -> bytes:
    """What stands for `count` bytes left out."""
    return f"... ({count} bytes cut)".encode()


def unfinished(printed: bytes) -> tuple[bytes, int]:
    """What would finish the end of `printed`: the rest of a redaction marker it ends
    inside, or the number of continuation bytes of a UTF-8 character it ends inside."""
    for length in range(min(len(printed), len(_MARKER) - 1), 0, -1):
        if _MARKER.startswith(printed[-length:]):
            return _MARKER[length:], 0
    for back in range(1, min(4, len(printed)) + 1):
        byte = printed[-back]
        if byte & 0xC0 != 0x80:  # the character's first byte: how long it is
            size = 4 if byte >= 0xF0 else 3 if byte >= 0xE0 else 2 if byte >= 0xC0 else 1
            return b"", max(size - back, 0)
    return b"", 0


class StreamCutter:
    """Cuts long values from a byte stream that arrives in arbitrary chunks. It holds
    back only the start of a heredoc's line (at most _HEAD_BYTES), until it tells whether
    the line closes the heredoc; every other byte is printed or counted as it comes."""

    def __init__(self, value_bytes: int = VALUE_BYTES, line_bytes: int = LINE_BYTES) -> None:
        self._value_bytes = value_bytes
        self._line_bytes = line_bytes
        # Bytes of the current line printed so far, markers included.
        self._line = 0
        # Bytes of the open quoted string printed so far; None outside a string.
        self._string: int | None = None
        # The open string's last byte was an escaping backslash: the next byte is escaped.
        self._escaped = False
        # Bytes of the open heredoc's lines printed so far; None outside a heredoc.
        self._block: int | None = None
        # The held start of a heredoc's line (after its newline, which it holds too while
        # the heredoc is being cut); None when nothing is held.
        self._head: bytes | None = None
        # The last bytes printed of the line (a marker's length at most).
        self._recent = b""
        # Room ran out inside a marker or a character: the bytes that would finish the
        # marker, or how many continuation bytes would finish the character.
        self._finish_marker = b""
        self._finish_char = 0
        # What is (or, once finished, will be) left out: None, _STRING (to its closing
        # quote), _BLOCK (to the heredoc's closing line) or _LINE (to its end).
        self._cutting: str | None = None
        # Bytes left out since the cut began.
        self._cut = 0

    def feed(self, data: bytes) -> bytes:
        """What is printed of `data`."""
        out: list[bytes] = []
        at = 0
        while at < len(data):
            if self._finish_marker or self._finish_char:
                at = self._finish(data, at, out)
            elif self._head is not None:
                at = self._hold_head(data, at, out)
            elif self._cutting is not None:
                at = self._leave_out(data, at, out)
            elif self._string is not None:
                at = self._in_string(data, at, out)
            else:
                at = self._in_text(data, at, out)
        return b"".join(out)

    def flush(self) -> bytes:
        """The end of the stream: a cut still open says how much it left out."""
        out: list[bytes] = []
        head, self._head = self._head, None
        if head and self._cutting is not None:
            self._cut += len(head)
        elif head:
            out.append(self.feed(head))
        if self._cutting is not None:
            self._end_cut(out)
        self._finish_marker, self._finish_char = b"", 0
        self._string, self._escaped, self._line, self._recent = None, False, 0, b""
        self._block = None
        return b"".join(out)

    def _in_text(self, data: bytes, at: int, out: list[bytes]) -> int:
        if self._block is not None:  # a heredoc's lines are raw: a quote opens no string
            end = data.find(b"\n", at)
        else:
            found = _IN_TEXT.search(data, at)
            end = -1 if found is None else found.start()
        stop = self._keep(data, at, len(data) if end < 0 else end, out)
        if end < 0 or stop < end:
            return stop
        if data[end] == _NEWLINE:
            if self._block is None and self._recent.endswith(_HEREDOC):
                self._block = 0
            out.append(b"\n")
            self._line, self._recent = 0, b""
            if self._block is not None:
                self._head = b""
            return end + 1
        stop = self._keep(data, end, end + 1, out)
        if stop > end:
            self._string = 0  # the opening quote is the line's, not the string's
        return stop

    def _in_string(self, data: bytes, at: int, out: list[bytes]) -> int:
        if self._escaped:  # the escaped byte: room for it was left with its backslash
            self._escaped = False
            if data[at] == _NEWLINE:
                self._string = None
                return at
            return self._keep(data, at, at + 1, out)
        found = _IN_STRING.search(data, at)
        end = len(data) if found is None else found.start()
        stop = self._keep(data, at, end, out)
        if stop < end or found is None:
            return stop
        if data[end] == _NEWLINE:  # an unclosed string ends with its line
            self._string = None
            return end
        if data[end] == _QUOTE:
            self._string = None
            return self._keep(data, end, end + 1, out)
        # An escape is printed whole or not at all: room for the backslash and its byte.
        if self._room() < 2:
            self._begin_cut()
            return end
        self._escaped = True
        return self._keep(data, end, end + 1, out)

    def _finish(self, data: bytes, at: int, out: list[bytes]) -> int:
        """One byte that may finish a marker or a character the room ran out in: printed
        if it does, else the cut begins at it."""
        byte = data[at]
        if self._finish_marker[:1] == data[at : at + 1]:
            self._finish_marker = self._finish_marker[1:]
        elif self._finish_char and byte & 0xC0 == 0x80:
            self._finish_char -= 1
        else:
            self._finish_marker, self._finish_char = b"", 0
            return at
        self._print(data, at, at + 1, out)
        return at + 1

    def _hold_head(self, data: bytes, at: int, out: list[bytes]) -> int:
        """Holds the start of a heredoc's line until it tells whether the line closes the
        heredoc; then prints it (the cut, if any, ends before it) or goes on."""
        assert self._head is not None
        take = data[at : at + _HEAD_BYTES - len(self._head)]
        newline = take.find(b"\n")
        if newline >= 0:
            take = take[:newline]
        head = self._head + take
        start = head.lstrip(b"\n").lstrip(b" ")
        if len(start) < len(_HEREDOC_END) and newline < 0 and len(head) < _HEAD_BYTES:
            self._head = head
            return at + len(take)
        self._head = None
        if start.startswith(_HEREDOC_END):
            self._block = None
            if self._cutting is not None:
                self._end_cut(out)
            out.append(self.feed(head))
        elif self._cutting is not None:
            self._cut += len(head)
        else:
            out.append(self.feed(head))
        return at + len(take)

    def _leave_out(self, data: bytes, at: int, out: list[bytes]) -> int:
        """Counts what is left out, up to the end of the string, heredoc or line."""
        if self._cutting == _BLOCK:
            newline = data.find(b"\n", at)
            end = len(data) if newline < 0 else newline
            self._cut += end - at
            if newline < 0:
                return end
            self._head = b"\n"  # held with the line it starts
            return end + 1
        if self._cutting == _LINE:
            newline = data.find(b"\n", at)
            end = len(data) if newline < 0 else newline
            self._cut += end - at
            if newline >= 0:
                self._end_cut(out)
            return end
        if self._escaped and data[at] != _NEWLINE:
            self._escaped = False
            self._cut += 1
            return at + 1
        self._escaped = False
        found = _IN_STRING.search(data, at)
        end = len(data) if found is None else found.start()
        self._cut += end - at
        if found is None:
            return end
        if data[end] == _BACKSLASH:
            self._cut += 1
            self._escaped = True
            return end + 1
        self._end_cut(out)
        self._string = None
        if data[end] == _QUOTE:  # the closing quote is printed after the marker
            return self._keep(data, end, end + 1, out)
        return end  # an unclosed string: its line ends

    def _room(self) -> int:
        room = self._line_bytes - self._line
        value = self._string if self._string is not None else self._block
        if value is not None:
            room = min(room, self._value_bytes - value)
        return max(room, 0)

    def _keep(self, data: bytes, at: int, end: int, out: list[bytes]) -> int:
        """Prints data[at:end] as far as there is room; where the room runs out, a cut
        begins. Returns where printing stopped."""
        stop = min(end, at + self._room())
        self._print(data, at, stop, out)
        if stop < end:
            self._begin_cut()
        return stop

    def _print(self, data: bytes, at: int, stop: int, out: list[bytes]) -> None:
        if stop <= at:
            return
        out.append(data[at:stop])
        self._line += stop - at
        if self._string is not None:
            self._string += stop - at
        elif self._block is not None:
            self._block += stop - at
        self._recent = (self._recent + data[max(at, stop - len(_MARKER)) : stop])[-len(_MARKER) :]

    def _begin_cut(self) -> None:
        """A string or heredoc whose own room ran out is left out to its closing quote or
        line; a line whose room ran out, to its end. A marker or character the room ran
        out in is finished first."""
        value = self._string if self._string is not None else self._block
        in_value = value is not None and self._value_bytes - value <= self._line_bytes - self._line
        if not in_value:
            self._cutting = _LINE
        else:
            self._cutting = _STRING if self._string is not None else _BLOCK
        self._cut = 0
        self._finish_marker, self._finish_char = unfinished(self._recent)

    def _end_cut(self, out: list[bytes]) -> None:
        if self._cut:
            marker = cut_marker(self._cut)
            out.append(marker)
            self._line += len(marker)
        self._cutting, self._cut, self._recent = None, 0, b""
