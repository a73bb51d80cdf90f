"""`captf state list|pull|push KIND/NAME`: an object's state for an operator (docs/cli.md).

The state is read and written exactly as the runner does (controller/runner/state.py):
the object's Secrets only when labelled for it, parts checked against their digests, a
write switched in one step over the version read. `push` is refused unless the object is
paused or suspended (no Job may run meanwhile), refuses a state that is not JSON, is over
the maximum, has another lineage or a serial below the current one (or the same serial
with other content), and backs up the current state before it switches."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from controller.cli.people.common import Refused, run_command, source_of
from controller.cli.people.waiting import Live, read_live
from controller.core.basics.names import (
    ANN_BACKED_UP_AT,
    ANN_SERIAL,
    ANN_WRITTEN_BY,
    MANAGED_BY,
    state_secret_name,
)
from controller.core.decide.pause import pause_of
from controller.runner import state_layout as layout
from controller.runner.kube import TransportKube
from controller.runner.state import StateError, StateStore, StoredState
from controller.runner.state_body import lineage_of, serial_of
from runtime.jsonobj import Json

T = TypeVar("T")
PUSHER = "captf state push"


def _run(args: argparse.Namespace, live: Live, body: Callable[[StateStore], Awaitable[T]]) -> T:
    """`body` with a store of the object's state, over the command's live transport."""

    async def go() -> T:
        async with source_of(args).open() as transport:
            # The live transport waits out transient answers already (--request-timeout).
            kube = TransportKube(transport, live.snap.namespace, delays=())
            store = StateStore(
                kube,
                secret_name=state_secret_name(live.snap.namespace, live.kind, live.name),
                object_name=live.name,
                object_kind=live.kind,
                labels=MANAGED_BY,
                writer=PUSHER,
            )
            try:
                return await body(store)
            except StateError as err:
                raise Refused(f"{live.who}: {err}") from None

    return asyncio.run(go())


def _rows(live: Live) -> list[Json]:
    """The state, then its backups, newest serial first."""
    state = live.snap.state_secret
    rows = [_row(state, "state")] if state is not None else []
    backups = [_row(secret, "backup") for secret in live.snap.backups()]
    return rows + sorted(backups, key=lambda r: -(r["serial"] or 0))


def _row(secret: Json, what: str) -> Json:
    meta = secret.get("metadata") or {}
    notes = meta.get("annotations") or {}
    manifest = None
    with contextlib.suppress(layout.LayoutError):
        manifest = layout.manifest_of(secret)
    raw = (secret.get("data") or {}).get("terraform.tfstate")
    size = manifest.get("size") if manifest else (len(base64.b64decode(raw)) if raw else None)
    serial = notes.get(ANN_SERIAL)
    return {
        "what": what,
        "name": meta.get("name"),
        "serial": int(serial) if serial and serial.isdigit() else None,
        "size": size,
        "parts": len((manifest or {}).get("parts") or []),
        "writtenBy": notes.get(ANN_WRITTEN_BY) or "",
        "backedUpAt": notes.get(ANN_BACKED_UP_AT) or "",
    }


def _list(args: argparse.Namespace) -> int:
    live = read_live(args.ref, source=source_of(args))
    rows = _rows(live)
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'WHAT':7} {'SERIAL':>6} {'SIZE':>11} {'PARTS':>5} {'WRITTEN BY':28} NAME")
    for r in rows:
        size = "?" if r["size"] is None else str(r["size"])
        serial = "?" if r["serial"] is None else str(r["serial"])
        line = f"{r['what']:7} {serial:>6} {size:>11} {r['parts']:>5} {r['writtenBy']:28} "
        print(line + str(r["name"]))
    if not rows:
        print(f"{live.who} has no state")
    return 0


def _pull(args: argparse.Namespace) -> int:
    live = read_live(args.ref, source=source_of(args))

    async def read(store: StateStore) -> bytes:
        if args.serial is None:
            found = await store.load()
            if found is None:
                raise Refused(f"{live.who} has no state")
            return found.data
        secret = await store.backup(args.serial)
        return (await store.parse(secret)).data

    data = _run(args, live, read)
    if args.file in (None, "-"):
        sys.stdout.buffer.write(data)
    else:
        Path(args.file).write_bytes(data)
        print(f"{live.who}: state serial {serial_of(data)} written to {args.file}", file=sys.stderr)
    return 0


def check_push(current: StoredState | None, data: bytes) -> str | None:
    """Why `data` may not replace `current`, or None: another lineage, a lower serial, the
    same serial with other content."""
    try:
        serial = serial_of(data)
    except StateError as err:
        return str(err)
    if current is None:
        return None
    if lineage_of(data) != lineage_of(current.data):
        return (
            f"the state's lineage {lineage_of(data)!r} is not the current state's "
            f"{lineage_of(current.data)!r}"
        )
    if serial < current.serial:
        return f"the state's serial {serial} is below the current serial {current.serial}"
    if serial == current.serial and data != current.data:
        return f"the state's serial {serial} is the current one, with other content"
    return None


def _push(args: argparse.Namespace) -> int:
    live = read_live(args.ref, source=source_of(args))
    suspended = (live.snap.spec or {}).get("suspend") is True
    if pause_of(live.snap) is None and not suspended:
        raise Refused(
            f"{live.who} is neither paused nor suspended: set spec.suspend: true (or pause its "
            "Cluster) so no Job runs while the state is replaced"
        )
    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    problem = layout.too_large(len(data))
    if problem is not None:
        raise Refused(f"{live.who}: {problem}; nothing was written")

    async def write(store: StateStore) -> tuple[int, int | None]:
        current = await store.load()
        why = check_push(current, data)
        if why is not None:
            raise Refused(f"{live.who}: {why}; nothing was written")
        hashed = None if current is None else current.inputs_hash
        serial = await store.save(current, data, hashed)
        return serial, None if current is None else current.serial

    serial, before = _run(args, live, write)
    kept = "" if before is None else f"; the state it replaced is backup serial {before}"
    print(f"{live.who}: state serial {serial} pushed{kept}")
    return 0


run_list = run_command("state list", _list)
run_pull = run_command("state pull", _pull)
run_push = run_command("state push", _push)
run = run_list
