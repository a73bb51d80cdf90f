"""The Secrets the state store writes, as bodies: pure functions of what it read and
what it writes. state.py decides when each is written and does the writing; here is
only their shape: a manifest's parts (immutable), a backup (the old manifest's data,
less its outputs), and the copy of an unreadable state a restore keeps."""

from __future__ import annotations

import base64
from collections.abc import Mapping

from controller.core.basics.names import (
    ANN_BACKED_UP_AT,
    ANN_INPUTS_HASH,
    ANN_SERIAL,
    ANN_WRITTEN_BY,
    STATE_OUTPUTS_KEY,
)
from controller.runner import state_layout as layout
from runtime.jsonobj import Json


def meta(secret: Json, field: str) -> dict[str, str]:
    """A copy of the Secret's labels or annotations (`field`), empty when it has none."""
    return dict((secret.get("metadata") or {}).get(field) or {})


def secret_body(metadata: Json, keys: Mapping[str, bytes]) -> Json:
    body: Json = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata}
    body["data"] = {k: base64.b64encode(v).decode() for k, v in keys.items()}
    return body


def part_body(name: str, labels: Mapping[str, str], data: bytes) -> Json:
    """One part of a laid-out state: immutable, so no write ever changes its bytes."""
    body = secret_body({"name": name, "labels": dict(labels)}, {layout.PART_KEY: data})
    body["immutable"] = True
    return body


def backup_body(
    name: str,
    old: Json,
    serial: int,
    inputs_hash: str | None,
    labels: Mapping[str, str],
    backed_up_at: str,
) -> Json:
    """The backup `name` of the state Secret `old` (at `serial`): its data as stored (a
    manifest names the same parts), without the outputs, which only the state holds."""
    annotations = {ANN_SERIAL: str(serial), ANN_BACKED_UP_AT: backed_up_at}
    if inputs_hash is not None:
        annotations[ANN_INPUTS_HASH] = inputs_hash
    written_by = meta(old, "annotations").get(ANN_WRITTEN_BY)
    if written_by:
        annotations[ANN_WRITTEN_BY] = written_by
    metadata: Json = {"name": name, "labels": dict(labels), "annotations": annotations}
    body: Json = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata}
    body["data"] = {k: v for k, v in (old.get("data") or {}).items() if k != STATE_OUTPUTS_KEY}
    return body


def unreadable_copy_body(name: str, secret: Json, labels: Mapping[str, str]) -> Json:
    """The data of the unreadable state Secret `secret`, kept under `name` as it is."""
    body: Json = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque"}
    body["metadata"] = {"name": name, "labels": dict(labels)}
    body["data"] = dict(secret.get("data") or {})
    return body
