"""The state Secret, its backups, and restore.

Invariants:
- The state Secret `<name>-state` holds `terraform.tfstate`; its `captf.io/serial`
  annotation is the serial inside that state, and `captf.io/inputs-hash` (when
  present) is the inputs hash of the last apply that succeeded on this state.
- Before the state's content is replaced, the old content is kept in the backup
  Secret `<name>-state-<old serial>` (labelled `captf.io/state-backup-of`); the
  newest `keep` backups survive.
- Serials only grow: tofu raises the serial on every change, and a restore
  writes the backup's content under a serial above the current one, so a
  backup's name always means one state.
- Every write carries the resourceVersion read at load: a concurrent writer makes
  it fail (`StateConflict`) instead of being overwritten silently.
- `outputs.json` (for an object of a contract role) is the contract outputs of the
  state's root, `{name: value}`, written in the same write as the state: it is exactly
  the state's, for every op that writes state (a restore included), and it travels
  with the Secret (`clusterctl move`). The controller reads it, never the state.

State and backups carry no owner reference on purpose: they are the only record
of real infrastructure and must outlive the object, its Jobs and mistakes."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.core.basics import serials
from controller.core.basics.names import (
    ANN_BACKED_UP_AT,
    ANN_INPUTS_HASH,
    ANN_SERIAL,
    LABEL_BACKUP_OF,
    LABEL_CLUSTERCTL_MOVE,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_RESCUE_OF,
    MANAGED_BY,
    STATE_KEY,
    STATE_OUTPUTS_KEY,
    backup_secret_name,
    labelled_for,
    legacy_state_secret_name,
)
from controller.core.contract.outputs import Pending, Valid, decode, values_of
from controller.core.contract.roles import UnknownKind, contract_for_kind
from controller.runner.kube import Json, Kube
from runtime.errors import ApiError

OUTPUTS_KEY = STATE_OUTPUTS_KEY
# When a backup was written: backups are pruned oldest first by this, not by
# serial, so a fresh lineage (serials from 1 again) does not lose its backups.
# Enough to step back over a few bad applies; each is up to 1 MiB of etcd.
DEFAULT_KEEP = 5


class StateError(Exception):
    """The state or a backup is missing or unreadable; the message says which."""


class StateConflict(StateError):
    """Someone else wrote the state Secret since it was loaded."""


@dataclass(frozen=True)
class StoredState:
    data: bytes
    serial: int
    inputs_hash: str | None
    secret: Json  # as read: its resourceVersion guards the next write
    outputs: bytes | None = None  # the stored outputs.json


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
    the outputs still null and the health's state. None for a kind outside the contract,
    or outputs that do not decode (the controller reports those from outputs.json)."""
    raw = contract_outputs(data, kind)
    if raw is None:
        return None
    decoded = decode(contract_for_kind(kind).role, json.loads(raw))
    if not isinstance(decoded, Valid | Pending):
        return None
    waiting = decoded.waiting if isinstance(decoded, Pending) else ()
    health = decoded.outputs.health
    return {"pending": list(waiting), "health": None if health is None else health.state}


def serial_of(data: bytes) -> int:
    try:
        serial = json.loads(data)["serial"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"state has no readable serial: {exc}") from None
    if not isinstance(serial, int) or isinstance(serial, bool):
        raise StateError(f"state serial {serial!r} is not an integer")
    return serial


def with_serial(data: bytes, serial: int) -> bytes:
    """The same state under another serial, written as tofu writes state files."""
    document: dict[str, Any] = json.loads(data)
    document["serial"] = serial
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def _decode(secret: Json, key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    return None if value is None else base64.b64decode(value)


def _meta(secret: Json, field: str) -> dict[str, str]:
    return dict((secret.get("metadata") or {}).get(field) or {})


class StateStore:
    def __init__(
        self,
        kube: Kube,
        *,
        secret_name: str,
        object_name: str,
        object_kind: str,
        keep: int = DEFAULT_KEEP,
        labels: Mapping[str, str] = MANAGED_BY,
    ) -> None:
        self._kube = kube
        self._name = secret_name
        self._object_labels = {
            **labels,
            LABEL_NAME: object_name,
            LABEL_KIND: object_kind,
            LABEL_CLUSTERCTL_MOVE: "",
        }
        self._object_name = object_name
        self._object_kind = object_kind
        self._keep = keep

    def backup_name(self, serial: int) -> str:
        return backup_secret_name(self._name, serial)

    async def load(self) -> StoredState | None:
        """The current state, or None before the first write: the Secret of the state's
        name, else the one of the name before kinds were part of it (until the controller
        moves it), each only when labelled for this object. One of our names without our
        labels is not read as a state, nor taken for a missing one."""
        secret = await self._kube.get_secret(self._name)
        if secret is None:
            secret = await self._kube.get_secret(self._legacy_name)
            if secret is None or not labelled_for(secret, self._object_kind, self._object_name):
                return None
            return self._parse(secret, self._legacy_name)
        if not labelled_for(secret, self._object_kind, self._object_name):
            raise StateError(
                f"Secret {self._name} is not labelled as the state of "
                f"{self._object_kind}/{self._object_name}; it is not read"
            )
        return self._parse(secret, self._name)

    @property
    def _legacy_name(self) -> str:
        return legacy_state_secret_name(self._object_name)

    def _is_backup(self, secret: Json) -> bool:
        labelled = labelled_for(secret, self._object_kind, self._object_name)
        return labelled and _meta(secret, "labels").get(LABEL_BACKUP_OF) == self._object_name

    @property
    def _backups_selector(self) -> str:
        return f"{LABEL_BACKUP_OF}={self._object_name},{LABEL_KIND}={self._object_kind}"

    def _parse(self, secret: Json, name: str) -> StoredState:
        data = _decode(secret, STATE_KEY)
        if data is None:
            raise StateError(f"Secret {name} has no {STATE_KEY} key")
        annotations = _meta(secret, "annotations")
        hashed = annotations.get(ANN_INPUTS_HASH)
        return StoredState(data, serial_of(data), hashed, secret, _decode(secret, OUTPUTS_KEY))

    async def save(self, old: StoredState | None, data: bytes, inputs_hash: str | None) -> int:
        """Writes `data` as the state (backing up `old` first); returns its serial.

        `inputs_hash` is the annotation to leave: the new inputs after a
        successful apply, else the old one. Writes nothing if nothing changed."""
        serial = serial_of(data)
        outputs = contract_outputs(data, self._object_kind)
        unchanged = old is not None and (old.data, old.inputs_hash) == (data, inputs_hash)
        if old is not None and unchanged and old.outputs == outputs:
            return old.serial
        if old is not None and old.data != data:
            await self._backup(old)
        labels = {**(_meta(old.secret, "labels") if old else {}), **self._object_labels}
        annotations = _meta(old.secret, "annotations") if old else {}
        annotations[ANN_SERIAL] = str(serial)
        annotations.pop(ANN_INPUTS_HASH, None)
        if inputs_hash is not None:
            annotations[ANN_INPUTS_HASH] = inputs_hash
        metadata: Json = {"name": self._name, "labels": labels, "annotations": annotations}
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata}
        stored = {STATE_KEY: base64.b64encode(data).decode()}
        if outputs is not None:
            stored[OUTPUTS_KEY] = base64.b64encode(outputs).decode()
        body["data"] = stored
        try:
            if old is None or old.secret["metadata"].get("name") != self._name:
                # Nothing yet under this name (a state read under the older name is
                # written here; the controller retires the older one).
                await self._kube.create_secret(body)
            else:
                metadata["resourceVersion"] = old.secret["metadata"]["resourceVersion"]
                await self._kube.replace_secret(self._name, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            if not await self._holds(data, inputs_hash):
                raise StateConflict(f"Secret {self._name} changed while this Job ran") from exc
            # Our own earlier attempt got through and only its answer was lost.
        await self._prune()
        return serial

    async def _holds(self, data: bytes, inputs_hash: str | None) -> bool:
        current = await self.load()
        return current is not None and (current.data, current.inputs_hash) == (data, inputs_hash)

    async def _backup(self, old: StoredState) -> None:
        name = self.backup_name(old.serial)
        annotations = {
            ANN_SERIAL: str(old.serial),
            ANN_BACKED_UP_AT: datetime.now(UTC).isoformat(timespec="microseconds"),
        }
        if old.inputs_hash is not None:
            annotations[ANN_INPUTS_HASH] = old.inputs_hash
        labels = {**self._object_labels, LABEL_BACKUP_OF: self._object_name}
        metadata: Json = {"name": name, "labels": labels, "annotations": annotations}
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata}
        body["data"] = {STATE_KEY: base64.b64encode(old.data).decode()}
        try:
            await self._kube.create_secret(body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            # Only a new lineage reuses a serial; the newer state is the one to keep.
            await self._kube.replace_secret(name, body)

    async def remove(self) -> None:
        """After a destroy that succeeded: the backups, then the state. Nothing is left
        that a later object of the same name could mistake for live infrastructure, and
        the controller's record that the object is destroyed is the destroy Job itself,
        which it reads before any rule about a missing state (docs/deletion.md). Backups
        first: a crash between the two leaves a state, which only holds the deletion until
        the destroy Job is accounted."""
        for backup in await self._kube.list_secrets(self._backups_selector):
            await self._kube.delete_secret(backup["metadata"]["name"])
        await self._kube.delete_secret(self._name)
        legacy = await self._kube.get_secret(self._legacy_name)
        if legacy is not None and labelled_for(legacy, self._object_kind, self._object_name):
            await self._kube.delete_secret(self._legacy_name)

    async def _prune(self) -> None:
        backups = await self._kube.list_secrets(self._backups_selector)

        def age_key(secret: Json) -> tuple[str, int]:
            annotations = _meta(secret, "annotations")
            serial = serials.serial_of(annotations.get(ANN_SERIAL))
            return annotations.get(ANN_BACKED_UP_AT, ""), -1 if serial is None else serial

        for secret in sorted(backups, key=age_key, reverse=True)[self._keep :]:
            await self._kube.delete_secret(secret["metadata"]["name"])

    async def restore(self, serial: int) -> int:
        """Makes backup `serial` the current state; returns the serial it now has."""
        name = self.backup_name(serial)
        backup = await self._kube.get_secret(name)
        if backup is None:
            # A backup the controller has not moved yet: under the older name.
            name = f"{self._legacy_name}-{serial}"
            backup = await self._kube.get_secret(name)
            if backup is None or not labelled_for(backup, self._object_kind, self._object_name):
                raise StateError(f"no backup Secret {self.backup_name(serial)} to restore from")
        if not self._is_backup(backup):
            raise StateError(f"Secret {name} is not labelled as a backup of this object")
        restored = self._parse(backup, name)
        try:
            current = await self.load()
        except StateError:
            return await self._over_unreadable(restored)
        if current is None:
            return await self.save(None, restored.data, restored.inputs_hash)
        new_serial = max(restored.serial, current.serial + 1)
        return await self.save(
            current, with_serial(restored.data, new_serial), restored.inputs_hash
        )

    async def _over_unreadable(self, restored: StoredState) -> int:
        """A restore over a state that cannot be read (the one way out of a deletion held
        on it): the unreadable Secret's data is kept in `<name>-unreadable-<version>`
        first, then replaced, over the version read, by the backup under a serial above
        both the backup's and the one the unreadable Secret's annotation claims."""
        secret = await self._kube.get_secret(self._name)
        if secret is None:
            return await self.save(None, restored.data, restored.inputs_hash)
        if not labelled_for(secret, self._object_kind, self._object_name):
            raise StateError(f"Secret {self._name} is not labelled as this object's state")
        version = str(secret["metadata"].get("resourceVersion", ""))
        claimed = serials.serial_of(_meta(secret, "annotations").get(ANN_SERIAL)) or 0
        serial = max(restored.serial, claimed + 1)
        keep = {
            **self._object_labels,
            LABEL_RESCUE_OF: self._object_name,
        }
        body: Json = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque"}
        body["metadata"] = {"name": f"{self._name}-unreadable-{version}", "labels": keep}
        body["data"] = dict(secret.get("data") or {})
        try:
            await self._kube.create_secret(body)
        except ApiError as exc:
            if exc.status != 409:  # kept by an earlier attempt of this restore
                raise
        data = with_serial(restored.data, serial)
        annotations = {ANN_SERIAL: str(serial)}
        if restored.inputs_hash is not None:
            annotations[ANN_INPUTS_HASH] = restored.inputs_hash
        labels = {**_meta(secret, "labels"), **self._object_labels}
        metadata: Json = {
            "name": self._name,
            "labels": labels,
            "annotations": annotations,
            "resourceVersion": version,
        }
        state: Json = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque"}
        state["metadata"] = metadata
        state["data"] = {STATE_KEY: base64.b64encode(data).decode()}
        try:
            await self._kube.replace_secret(self._name, state)
        except ApiError as exc:
            if exc.status != 409:
                raise
            raise StateConflict(f"Secret {self._name} changed while this Job ran") from exc
        return serial
