"""`captf restore KIND/NAME --serial N`: asks for the state backup of serial N.

Refused when no backup of that serial exists (the restore could only fail, and a
failed restore is not retried for its serial) or when that serial is already the
one last restored."""

from __future__ import annotations

import argparse

from controller.cli.people.annotate import annotate
from controller.cli.people.common import Refused, run_command, source_of
from controller.cli.people.waiting import Live, read_live
from controller.core.basics.names import ANN_RESTORE_SERIAL, ANN_SERIAL
from controller.core.basics.serials import serial_of


def backups(live: Live) -> dict[int, str]:
    """Serial -> backup Secret name, for the object's state backups (labelled with its name
    and kind)."""
    out: dict[int, str] = {}
    for secret in live.snap.backups():
        meta = secret.get("metadata") or {}
        name = str(meta.get("name", ""))
        serial = serial_of((meta.get("annotations") or {}).get(ANN_SERIAL))
        if serial is not None:
            out[serial] = name
    return out


def _restore(args: argparse.Namespace) -> int:
    if args.serial < 0:
        raise Refused(f"--serial must not be negative, got {args.serial}")
    live = read_live(args.ref, source=source_of(args))
    found = backups(live)
    if args.serial not in found:
        have = ", ".join(str(s) for s in sorted(found)) or "none"
        raise Refused(f"{live.who} has no state backup of serial {args.serial} (backups: {have})")
    if live.snap.status.get("lastRestoredSerial") == args.serial:
        raise Refused(
            f"{live.who} last restored serial {args.serial} already; remove the annotation "
            f"{ANN_RESTORE_SERIAL}, wait for status.lastRestoredSerial to clear, then ask again"
        )
    annotate(source_of(args), live.snap.obj, {ANN_RESTORE_SERIAL: str(args.serial)})
    print(f"{live.who}: restore of state serial {args.serial} ({found[args.serial]}) requested")
    return 0


run = run_command("restore", _restore)
