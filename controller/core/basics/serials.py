"""Whole numbers written as annotations: state serials, restore requests, attempt
sequences.

A serial is plain ASCII decimal digits, at most 18 of them (it fits an int64). The
annotations are free text to the API server, and int() alone would also take "1_000",
" 3", other scripts' digits, and refuse over 4,300 digits with an error. So anything
else is no serial: a restore request of "abc" or "-1" is no request at all (a restore
to it could never succeed, and running one would only fail again each time it is
accounted), while "03" and "3" ask for the same serial."""

from __future__ import annotations

import re
from collections.abc import Mapping

from controller.core.basics.names import ANN_RESTORE_SERIAL

_SERIAL = re.compile(r"[0-9]{1,18}")
# The Warning Event's reason when the object's restore annotation names no serial.
RESTORE_SERIAL_INVALID = "RestoreSerialInvalid"


def serial_of(text: object) -> int | None:
    """The serial `text` names, or None when it is not one."""
    if not isinstance(text, str) or _SERIAL.fullmatch(text) is None:
        return None
    return int(text)


def requested_serial(annotations: Mapping[str, str]) -> int | None:
    """The serial an object (or a restore Job) asks to restore, or None."""
    return serial_of(annotations.get(ANN_RESTORE_SERIAL))


def unusable_restore_request(annotations: Mapping[str, str]) -> str | None:
    """Why the object's restore annotation asks for nothing, or None when it is absent or
    names a serial: what the operator is told (the condition message and one Warning),
    since the API server stores any text there and no restore runs for it."""
    raw = annotations.get(ANN_RESTORE_SERIAL)
    if raw is None or serial_of(raw) is not None:
        return None
    shown = raw if len(raw) <= 40 else f"{raw[:40]}..."
    return f"{ANN_RESTORE_SERIAL}={shown!r} is not a state serial (decimal digits): no restore runs"
