"""The data of the Secrets and ConfigMaps objects read, fetched only when it changed.

Secrets and ConfigMaps are watched as metadata only (PartialObjectMetadata):
the cluster's other Secrets cost a few hundred bytes each, and no Secret value
sits in the controller's memory unless an object reads it. Before a reconcile,
`load` fetches the data of the ones that object reads whose resourceVersion moved
since the last fetch; everything else comes from what is held.

What is held per Secret or ConfigMap is its data and nothing else (the metadata
is in the metadata cache), and for a plan Secret not even that: its keys, since
all a decision asks of it is whether it has any.

The Secrets CAPTF writes itself are labelled and cached whole by their own
informer (`whole`): those are read from there and never fetched."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.cache import Resource, Store, resource_version
from runtime.errors import ApiError
from runtime.jsonobj import Json

Data = dict[str, str]


class Reader(Protocol):
    async def request(
        self, method: str, path: str, *, params: Mapping[str, str] | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Wanted:
    """One Secret or ConfigMap whose data a decision reads; `keys_only` for plan Secrets."""

    name: str
    keys_only: bool = False


@dataclass
class Contents:
    """Data by "namespace/name" for one resource, kept at the version last fetched."""

    reader: Reader
    resource: Resource
    metadata: Store
    # The Secrets CAPTF wrote, cached with the data decisions read: an object there with
    # "data" is read from there, never fetched; one without (a state: its data is not
    # kept) is fetched like the others if something reads its data after all.
    whole: Store | None = None
    # key -> (the resourceVersion fetched, the data kept)
    _held: dict[str, tuple[str, Data]] = field(default_factory=dict)
    fetches: int = 0

    async def load(self, namespace: str, wanted: Iterable[Wanted]) -> None:
        """Fetches what is missing or out of date; a Secret that is gone is forgotten."""
        for item in wanted:
            key = f"{namespace}/{item.name}"
            meta = self.metadata_of(key)
            if meta is not None and "data" in meta:
                self._held.pop(key, None)
                continue
            if meta is None:
                self._held.pop(key, None)
                continue
            held = self._held.get(key)
            if held is not None and held[0] == resource_version(meta):
                continue
            await self._fetch(namespace, item, key)

    def data(self, namespace: str, name: str) -> Data | None:
        key = f"{namespace}/{name}"
        whole = self._whole(key)
        if whole is not None and "data" in whole:
            found: Data = whole["data"]
            return found
        held = self._held.get(key)
        return None if held is None else held[1]

    def metadata_of(self, key: str) -> Json | None:
        """The object as cached, from whichever cache holds it."""
        return self._whole(key) or self.metadata.get(key)

    def with_data(self, namespace: str, names: Iterable[str]) -> dict[str, Json]:
        """The named Secrets or ConfigMaps that exist, each with the data held for it."""
        found: dict[str, Json] = {}
        for name in names:
            meta = self.metadata_of(f"{namespace}/{name}")
            if meta is None:
                continue
            data = self.data(namespace, name)
            found[name] = meta if data is None else meta | {"data": data}
        return found

    def _whole(self, key: str) -> Json | None:
        return None if self.whole is None else self.whole.get(key)

    def forget(self, key: str) -> None:
        self._held.pop(key, None)

    def forget_deleted(self, old: Json | None, new: Json | None) -> None:
        """An informer handler: what is held of an object goes when the object does."""
        if old is not None and new is None:
            meta = old["metadata"]
            self.forget(f"{meta.get('namespace', '')}/{meta['name']}")

    def __len__(self) -> int:
        return len(self._held)

    async def _fetch(self, namespace: str, item: Wanted, key: str) -> None:
        self.fetches += 1
        try:
            found = await self.reader.request("GET", f"{self.resource.path(namespace)}/{item.name}")
        except ApiError as error:
            if error.status != 404:
                raise
            self._held.pop(key, None)
            return
        data: Data = found.get("data") or {}
        kept = dict.fromkeys(data, "") if item.keys_only else data
        self._held[key] = (resource_version(found), kept)
