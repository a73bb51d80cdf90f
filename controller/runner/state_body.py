"""What the runner reads of a state's body: its serial, its contract outputs."""

from __future__ import annotations

import json
from typing import Any

from controller.core.contract.outputs import Pending, Valid, decode, values_of
from controller.core.contract.roles import UnknownKind, contract_for_kind


class StateError(Exception):
    """The state or a backup is missing or unreadable; the message says which."""


def contract_outputs(data: bytes, kind: str) -> bytes | None:
    """outputs.json for a state: the role's contract outputs among its root outputs, as
    canonical JSON (an output absent from the state is a null one, and left out). None
    for a kind outside the contract. Only the contract's names: the controller keeps this
    key in memory, and a module's other outputs are none of its business."""
    try:
        names = contract_for_kind(kind).outputs
    except UnknownKind:
        return None
    try:
        document = json.loads(data)
    except ValueError:
        return None
    found = values_of((document.get("outputs") if isinstance(document, dict) else None) or {})
    chosen = {name: found[name] for name in names if name in found}
    return json.dumps(chosen, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def contract_reading(data: bytes, kind: str) -> dict[str, object] | None:
    """What the result says of the contract outputs (controller/core/jobs/readings.py):
    the outputs still null, the health's state and its `healthy`. None for a kind outside
    the contract, or outputs that do not decode (the controller reports those from
    outputs.json)."""
    raw = contract_outputs(data, kind)
    if raw is None:
        return None
    decoded = decode(contract_for_kind(kind).role, json.loads(raw))
    if not isinstance(decoded, Valid | Pending):
        return None
    waiting = decoded.waiting if isinstance(decoded, Pending) else ()
    health = decoded.outputs.health
    if health is None:
        return {"pending": list(waiting), "health": None}
    return {"pending": list(waiting), "health": health.state, "healthy": health.healthy}


def serial_of(data: bytes) -> int:
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise StateError(f"the state is not JSON ({exc})") from None
    try:
        serial = document["serial"]
    except (KeyError, TypeError) as exc:
        raise StateError(f"state has no readable serial: {exc}") from None
    if not isinstance(serial, int) or isinstance(serial, bool):
        raise StateError(f"state serial {serial!r} is not an integer")
    return serial


def lineage_of(data: bytes) -> str | None:
    document = json.loads(data)
    lineage = document.get("lineage") if isinstance(document, dict) else None
    return lineage if isinstance(lineage, str) else None


def with_serial(data: bytes, serial: int) -> bytes:
    """The same state under another serial, written as tofu writes state files."""
    document: dict[str, Any] = json.loads(data)
    document["serial"] = serial
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()
