"""The cache: objects by key, plus named indexes over them.

Every mutation is synchronous (no `await` inside), so the event loop can never
interleave two of them and the store needs no lock. Objects are stored as the
API server sent them (or as the informer's transform left them), minus what no
controller reads: managedFields and the last-applied annotation (often the
largest parts of an object). What cached objects repeat is interned, so each
string is held once however many objects carry it: label and annotation keys,
label values (at most 63 characters by the API's rules: kinds, names, uids that
other objects' labels and owner references name too), annotation values of up
to 64 characters (flags, counters, hashes; longer ones are mostly unique, and
hashing them would cost more than it saves), the namespace, and the owner
references' strings."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple, TypeVar

from runtime.cache.resource import Obj, object_key, resource_version

T = TypeVar("T")

# An index function: the index values one object files under (any number, possibly none).
IndexFunc = Callable[[Obj], Iterable[str]]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Annotation values up to this many characters are interned (a sha256 in hex is 64).
SHORT = 64


class Change(NamedTuple):
    """What one mutation did: (None, new) added, (old, new) updated, (old, None) deleted."""

    old: Obj | None
    new: Obj | None


class Store:
    """Objects keyed by "namespace/name" ("name" when cluster-scoped), with indexes."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._indexers = dict(indexers or {})
        # Invariant: key in _objects  <=>  key filed under exactly indexer(obj) in every index.
        self._objects: dict[str, Obj] = {}
        self._indexes: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        # The version of the last list, event or bookmark applied: the whole store is at
        # least this current. Set only here, by `replace` and `reached`.
        self._version = ""

    @property
    def resource_version(self) -> str:
        return self._version

    def reached(self, version: str) -> None:
        """The watch has delivered everything up to `version` (an event or a bookmark)."""
        self._version = version

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __iter__(self) -> Iterator[Obj]:
        return iter(list(self._objects.values()))

    def get(self, key: str) -> Obj | None:
        return self._objects.get(key)

    def keys(self) -> list[str]:
        return list(self._objects)

    def version_of(self, key: str) -> str | None:
        """The resourceVersion of the object as last seen, None if not in the cache."""
        obj = self._objects.get(key)
        return None if obj is None else resource_version(obj)

    def by_index(self, index: str, value: str) -> list[Obj]:
        """The objects filed under `value` in the named index."""
        keys = self._indexes[index].get(value, ())
        return [self._objects[key] for key in keys]

    def index_values(self, index: str) -> list[str]:
        return list(self._indexes[index])

    def upsert(self, obj: Obj) -> Change | None:
        """Add or replace; None when the cache already holds this resourceVersion."""
        strip(obj)
        key = object_key(obj)
        old = self._objects.get(key)
        if old is not None and resource_version(old) == resource_version(obj):
            return None
        self._objects[key] = obj
        self._reindex(key, old, obj)
        return Change(old, obj)

    def delete(self, obj: Obj) -> Change | None:
        """Remove the object with this key; None when the cache did not hold it."""
        key = object_key(obj)
        old = self._objects.pop(key, None)
        if old is None:
            return None
        self._reindex(key, old, None)
        return Change(old, None)

    def replace(self, objects: Iterable[Obj], version: str) -> list[Change]:
        """Make the cache exactly `objects`; cached objects missing from them are deleted."""
        changes: list[Change] = []
        seen: set[str] = set()
        for obj in objects:
            seen.add(object_key(obj))
            change = self.upsert(obj)
            if change is not None:
                changes.append(change)
        for key in [key for key in self._objects if key not in seen]:
            old = self._objects.pop(key)
            self._reindex(key, old, None)
            changes.append(Change(old, None))
        self._version = version
        return changes

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, indexer in self._indexers.items():
            index = self._indexes[name]
            before = set(indexer(old)) if old is not None else set()
            after = set(indexer(new)) if new is not None else set()
            for value in before - after:
                keys = index[value]
                keys.discard(key)
                if not keys:
                    del index[value]
            for value in after - before:
                index.setdefault(value, set()).add(key)


def strip(obj: Obj) -> None:
    """Drop, in place, what a controller never reads and what costs the most memory."""
    metadata = obj.get("metadata")
    if not metadata:
        return
    metadata.pop("managedFields", None)
    annotations = metadata.get("annotations")
    if annotations:
        annotations.pop(LAST_APPLIED, None)
        metadata["annotations"] = {interned(k): _short(v) for k, v in annotations.items()}
    labels = metadata.get("labels")
    if labels:
        metadata["labels"] = {interned(k): interned(v) for k, v in labels.items()}
    if "namespace" in metadata:
        metadata["namespace"] = interned(metadata["namespace"])
    owners = metadata.get("ownerReferences")
    if owners:
        metadata["ownerReferences"] = [
            {k: interned(v) for k, v in ref.items()} if isinstance(ref, dict) else ref
            for ref in owners
        ]


def _short(value: object) -> object:
    return interned(value) if isinstance(value, str) and len(value) <= SHORT else value


def interned(value: T) -> T:
    """The interned copy of a string, held once however many cached objects repeat it
    (anything else as it is: the API server types these fields, but a transform or a
    test may hand the store something else). Transforms use it for their own fields."""
    # isinstance narrows the type; exactly str, because sys.intern refuses subclasses.
    if isinstance(value, str) and type(value) is str:
        return sys.intern(value)  # type: ignore[return-value]  # T is str here
    return value


def label_index(label: str) -> IndexFunc:
    """An index by the value of one label (objects without it are not indexed)."""

    def values(obj: Obj) -> Iterable[str]:
        value = (obj["metadata"].get("labels") or {}).get(label)
        return () if value is None else (value,)

    return values


def owner_uid_index(obj: Obj) -> Iterable[str]:
    """An index by the uid of every owner in metadata.ownerReferences."""
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences") or () if "uid" in ref]
