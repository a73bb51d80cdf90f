"""The state Secret, its backups, and restore.

Invariants:
- The state Secret `<name>-<kind>-<key>-state` holds the state's manifest (and the
  body inline, or parts beside it: controller/runner/state_layout.py); its
  `captf.io/serial` annotation is the serial inside that state, and
  `captf.io/inputs-hash` (when present) is the inputs hash of the last apply that
  succeeded on this state.
- The state changes in one write: the manifest Secret replaced over the
  resourceVersion read at load. Parts are written before it and never changed; parts
  no manifest names (state, backups, rescues, unreadable copies) are removed after it.
  A runner killed at any point leaves the old state or the new, whole.
- Before the state's content is replaced, the old manifest is kept in the backup Secret
  `<state>-<old serial>` (labelled `captf.io/state-backup-of`); it names the same
  parts, so a backup costs a manifest, not a copy. The newest `keep` backups survive.
- Serials only grow: tofu raises the serial on every change, and a restore writes the
  backup's content under a serial above the current one.
- A concurrent writer makes the write fail (`StateConflict`) instead of being
  overwritten silently.
- `outputs.json` (for an object of a contract role) is the contract outputs of the
  state's root, in the same write as the manifest. The controller reads it, never the
  state.
- A state over `MAX_STATE_BYTES` is refused before anything is written.

State, backups and parts carry no owner reference on purpose: they are the only record
of real infrastructure and must outlive the object, its Jobs and mistakes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from controller.core.basics import serials
from controller.core.basics.names import (
    ANN_BACKED_UP_AT,
    ANN_INPUTS_HASH,
    ANN_SERIAL,
    ANN_STATE_PARTS,
    ANN_WRITTEN_BY,
    LABEL_BACKUP_OF,
    LABEL_CLUSTERCTL_MOVE,
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_RESCUE_OF,
    LABEL_STATE_PART_OF,
    MANAGED_BY,
    STATE_OUTPUTS_KEY,
    backup_secret_name,
    labelled_for,
    legacy_state_secret_name,
)
from controller.runner import state_layout as layout
from controller.runner.kube import (
    Kube,
)
from controller.runner.state_body import (
    StateError,
    contract_outputs,
    contract_reading,
    serial_of,
    with_serial,
)
from controller.runner.state_secrets import (
    backup_body,
    meta,
    part_body,
    secret_body,
    unreadable_copy_body,
)
from runtime.errors import ApiError
from runtime.jsonobj import Json

__all__ = [
    "OUTPUTS_KEY",
    "StateConflict",
    "StateError",
    "StateStore",
    "StoredState",
    "contract_outputs",
    "contract_reading",
    "serial_of",
    "with_serial",
]

OUTPUTS_KEY = STATE_OUTPUTS_KEY
LABEL_PART_OF = LABEL_STATE_PART_OF
# When a backup was written: backups are pruned oldest first by this, not by
# serial, so a fresh lineage (serials from 1 again) does not lose its backups.
DEFAULT_KEEP = 5


class StateConflict(StateError):
    """Someone else wrote the state Secret since it was loaded."""


@dataclass(frozen=True)
class StoredState:
    data: bytes
    serial: int
    inputs_hash: str | None
    secret: Json  # as read: its resourceVersion guards the next write
    outputs: bytes | None = None  # the stored outputs.json


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
        writer: str | None = None,
    ) -> None:
        self._writer = writer
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

    @property
    def name(self) -> str:
        return self._name

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
            return await self.parse(secret)
        if not labelled_for(secret, self._object_kind, self._object_name):
            raise StateError(
                f"Secret {self._name} is not labelled as the state of "
                f"{self._object_kind}/{self._object_name}; it is not read"
            )
        return await self.parse(secret)

    @property
    def _legacy_name(self) -> str:
        return legacy_state_secret_name(self._object_name)

    def _is_backup(self, secret: Json) -> bool:
        labelled = labelled_for(secret, self._object_kind, self._object_name)
        return labelled and meta(secret, "labels").get(LABEL_BACKUP_OF) == self._object_name

    def _selector(self, label: str) -> str:
        return f"{label}={self._object_name},{LABEL_KIND}={self._object_kind}"

    async def parse(self, secret: Json) -> StoredState:
        """A state (or backup) Secret's state, read whole: its parts fetched and checked."""
        name = str(secret["metadata"].get("name", ""))
        try:
            data = await layout.read_body(secret, self._kube.get_secret)
        except layout.LayoutError as exc:
            raise StateError(f"Secret {name} cannot be read: {exc}") from None
        hashed = meta(secret, "annotations").get(ANN_INPUTS_HASH)
        outputs = layout.decoded(secret, OUTPUTS_KEY)
        return StoredState(data, serial_of(data), hashed, secret, outputs)

    async def save(self, old: StoredState | None, data: bytes, inputs_hash: str | None) -> int:
        """Writes `data` as the state (backing up `old` first); returns its serial.

        `inputs_hash` is the annotation to leave: the new inputs after a
        successful apply, else the old one. Writes nothing if nothing changed."""
        serial = self.check(data)
        outputs = contract_outputs(data, self._object_kind)
        unchanged = old is not None and (old.data, old.inputs_hash) == (data, inputs_hash)
        if old is not None and unchanged and old.outputs == outputs:
            return old.serial
        laid = await self._lay_out(self._name, data)
        if old is not None and old.data != data:
            await self._backup(old)
        labels = {**(meta(old.secret, "labels") if old else {}), **self._object_labels}
        annotations = meta(old.secret, "annotations") if old else {}
        annotations[ANN_SERIAL] = str(serial)
        annotations.pop(ANN_INPUTS_HASH, None)
        if inputs_hash is not None:
            annotations[ANN_INPUTS_HASH] = inputs_hash
        if self._writer is not None:
            annotations[ANN_WRITTEN_BY] = self._writer
        annotations.pop(ANN_STATE_PARTS, None)
        parts = layout.parts_annotation(laid)
        if parts is not None:
            annotations[ANN_STATE_PARTS] = parts
        metadata: Json = {"name": self._name, "labels": labels, "annotations": annotations}
        keys = dict(laid.keys)
        if outputs is not None:
            keys[OUTPUTS_KEY] = outputs
        body = secret_body(metadata, keys)
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

    @staticmethod
    def check(data: bytes) -> int:
        """The state's serial, once it is known to be JSON with a serial and within the
        maximum size; StateError before anything is written otherwise."""
        problem = layout.too_large(len(data))
        if problem is not None:
            raise StateError(problem)
        return serial_of(data)

    async def _lay_out(self, secret_name: str, data: bytes) -> layout.Laid:
        """The manifest keys of `data` as `secret_name` holds it; its parts written first
        (immutable, named from the body's digest: one that exists already holds them)."""
        laid = layout.lay_out(secret_name, data)
        labels = {
            **{k: v for k, v in self._object_labels.items() if k != LABEL_MANAGED_BY},
            LABEL_PART_OF: self._object_name,
        }
        for part in laid.parts:
            try:
                await self._kube.create_secret(part_body(part.name, labels, part.data))
            except ApiError as exc:
                if exc.status != 409:
                    raise
                found = await self._kube.get_secret(part.name)
                if layout.decoded(found or {}, layout.PART_KEY) != part.data:
                    raise StateError(f"part {part.name} exists with other bytes") from exc
        return laid

    async def _holds(self, data: bytes, inputs_hash: str | None) -> bool:
        try:
            current = await self.load()
        except StateError:
            return False
        return current is not None and (current.data, current.inputs_hash) == (data, inputs_hash)

    async def _backup(self, old: StoredState) -> None:
        """The old state's Secret data as it is stored (a manifest names the same parts)."""
        name = self.backup_name(old.serial)
        labels = {**self._object_labels, LABEL_BACKUP_OF: self._object_name}
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        body = backup_body(name, old.secret, old.serial, old.inputs_hash, labels, now)
        try:
            await self._kube.create_secret(body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            # Only a new lineage reuses a serial; the newer state is the one to keep.
            await self._kube.replace_secret(name, body)

    async def remove(self) -> None:
        """After a destroy that succeeded: the backups, then the state, then its parts.
        Nothing is left that a later object of the same name could mistake for live
        infrastructure, and the controller's record that the object is destroyed is the
        destroy Job itself, which it reads before any rule about a missing state
        (docs/deletion.md). Backups first: a crash between the two leaves a state, which
        only holds the deletion until the destroy Job is accounted."""
        for backup in await self._kube.list_secrets(self._selector(LABEL_BACKUP_OF)):
            await self._kube.delete_secret(backup["metadata"]["name"])
        await self._kube.delete_secret(self._name)
        legacy = await self._kube.get_secret(self._legacy_name)
        if legacy is not None and labelled_for(legacy, self._object_kind, self._object_name):
            await self._kube.delete_secret(self._legacy_name)
        await self.collect()

    async def _prune(self) -> None:
        backups = await self._kube.list_secrets(self._selector(LABEL_BACKUP_OF))

        def age_key(secret: Json) -> tuple[str, int]:
            annotations = meta(secret, "annotations")
            serial = serials.serial_of(annotations.get(ANN_SERIAL))
            return annotations.get(ANN_BACKED_UP_AT, ""), -1 if serial is None else serial

        for secret in sorted(backups, key=age_key, reverse=True)[self._keep :]:
            await self._kube.delete_secret(secret["metadata"]["name"])
        await self.collect()

    async def collect(self) -> None:
        """Removes the parts no manifest of this object names: not the state's, a backup's,
        a rescue's or an unreadable copy's. Runs after the switch, so it never takes a part
        of the state in force; a part of a write killed before its switch goes here."""
        parts = await self._kube.list_secrets(self._selector(LABEL_PART_OF))
        if not parts:
            return
        named: set[str] = set()
        state = await self._kube.get_secret(self._name)
        holders = [state] if state is not None else []
        holders += await self._kube.list_secrets(self._selector(LABEL_BACKUP_OF))
        holders += await self._kube.list_secrets(self._selector(LABEL_RESCUE_OF))
        for holder in holders:
            named.update(layout.part_names(holder))
        for part in parts:
            if part["metadata"]["name"] not in named:
                await self._kube.delete_secret(part["metadata"]["name"])

    async def backup(self, serial: int) -> Json:
        """The backup Secret of `serial`, labelled as this object's; StateError if none."""
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
        return backup

    async def restore(self, serial: int) -> int:
        """Makes backup `serial` the current state; returns the serial it now has."""
        restored = await self.parse(await self.backup(serial))
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
        on it): the unreadable Secret's data is kept in `<state>-unreadable-<version>`
        first (labelled as a rescue, so the parts it names stay), then replaced, over the
        version read, by the backup under a serial above both the backup's and the one the
        unreadable Secret's annotation claims."""
        secret = await self._kube.get_secret(self._name)
        if secret is None:
            return await self.save(None, restored.data, restored.inputs_hash)
        if not labelled_for(secret, self._object_kind, self._object_name):
            raise StateError(f"Secret {self._name} is not labelled as this object's state")
        version = str(secret["metadata"].get("resourceVersion", ""))
        claimed = serials.serial_of(meta(secret, "annotations").get(ANN_SERIAL)) or 0
        serial = max(restored.serial, claimed + 1)
        keep = {**self._object_labels, LABEL_RESCUE_OF: self._object_name}
        copy = unreadable_copy_body(f"{self._name}-unreadable-{version}", secret, keep)
        try:
            await self._kube.create_secret(copy)
        except ApiError as exc:
            if exc.status != 409:  # kept by an earlier attempt of this restore
                raise
        data = with_serial(restored.data, serial)
        laid = await self._lay_out(self._name, data)
        annotations = {ANN_SERIAL: str(serial)}
        if restored.inputs_hash is not None:
            annotations[ANN_INPUTS_HASH] = restored.inputs_hash
        parts = layout.parts_annotation(laid)
        if parts is not None:
            annotations[ANN_STATE_PARTS] = parts
        labels = {**meta(secret, "labels"), **self._object_labels}
        metadata: Json = {
            "name": self._name,
            "labels": labels,
            "annotations": annotations,
            "resourceVersion": version,
        }
        try:
            await self._kube.replace_secret(self._name, secret_body(metadata, laid.keys))
        except ApiError as exc:
            if exc.status != 409:
                raise
            raise StateConflict(f"Secret {self._name} changed while this Job ran") from exc
        await self.collect()
        return serial

    async def rescue(self, name: str, data: bytes) -> None:
        """`data` kept under `name` when the state cannot be saved: laid out as a state is
        (so any size fits), labelled as a rescue of this object."""
        laid = await self._lay_out(name, data)
        labels = {**self._object_labels, LABEL_RESCUE_OF: self._object_name}
        await self._kube.create_secret(secret_body({"name": name, "labels": labels}, laid.keys))
