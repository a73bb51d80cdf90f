"""One informer per namespace, read as one: for a process allowed to list and watch in a
few namespaces only (Roles, no ClusterRole), where a watch of all namespaces is refused.

Each namespace's informer is whole on its own (its list, its watch, its store and its
resource version); `Namespaced` only fans them in: reads go to the store of the key's
namespace or to all of them, handlers are registered on each, and it is synced once
every one is. Keys are "namespace/name", as in every Store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

import anyio

from runtime.cache.informer import Handler, Informer
from runtime.cache.resource import Obj, Resource
from runtime.cache.store import Change, Store


class StoreView(Store):
    """The stores of several namespaces, read as one Store (reads only: each namespace's
    informer writes its own store)."""

    def __init__(self, stores: Mapping[str, Store]) -> None:
        super().__init__()
        self._stores = dict(stores)

    @property
    def resource_version(self) -> str:
        raise TypeError("a view of several stores has no one resource version")

    def reached(self, version: str) -> None:
        raise TypeError("read-only view")

    def upsert(self, obj: Obj) -> Change | None:
        raise TypeError("read-only view")

    def delete(self, obj: Obj) -> Change | None:
        raise TypeError("read-only view")

    def replace(self, objects: Iterable[Obj], version: str) -> list[Change]:
        raise TypeError("read-only view")

    def _of(self, key: str) -> Store | None:
        namespace, slash, _ = key.partition("/")
        return self._stores.get(namespace) if slash else None

    def get(self, key: str) -> Obj | None:
        store = self._of(key)
        return None if store is None else store.get(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def version_of(self, key: str) -> str | None:
        store = self._of(key)
        return None if store is None else store.version_of(key)

    def keys(self) -> list[str]:
        out: list[str] = []
        for store in self._stores.values():
            out += store.keys()
        return out

    def __iter__(self) -> Iterator[Obj]:
        return iter([obj for store in self._stores.values() for obj in store])

    def __len__(self) -> int:
        return sum(len(store) for store in self._stores.values())

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [obj for store in self._stores.values() for obj in store.by_index(index, value)]

    def index_values(self, index: str) -> list[str]:
        values = {v for store in self._stores.values() for v in store.index_values(index)}
        return sorted(values)


class _AllSynced(asyncio.Event):
    """Set once every informer's `synced` is (read it; nothing sets it directly)."""

    def __init__(self, informers: list[Informer]) -> None:
        super().__init__()
        self._informers = informers

    def is_set(self) -> bool:
        return all(i.synced.is_set() for i in self._informers)

    async def wait(self) -> Literal[True]:
        for informer in self._informers:
            await informer.synced.wait()
        return True


class Namespaced(Informer):
    """Informers of one resource, one per namespace, with the reading side of one (an
    Informer to its readers: its store a StoreView, its `synced` all of theirs)."""

    def __init__(self, informers: Mapping[str, Informer]) -> None:
        # Not Informer.__init__: this one lists and watches nothing itself.
        assert informers, "at least one namespace"
        self._informers = dict(informers)
        first = next(iter(self._informers.values()))
        self.resource: Resource = first.resource
        self.store = StoreView({ns: i.store for ns, i in self._informers.items()})
        self.synced = _AllSynced(list(self._informers.values()))
        self._handlers = []

    def add_handler(self, handler: Handler) -> None:
        for informer in self._informers.values():
            informer.add_handler(handler)

    async def wait_synced(self) -> None:
        await self.synced.wait()

    async def run(self) -> None:
        """Every namespace's informer, until cancelled."""
        async with anyio.create_task_group() as group:
            for namespace, informer in self._informers.items():
                group.start_soon(informer.run, name=f"informer {self.resource.plural} {namespace}")
            await asyncio.Event().wait()  # the group's tasks never end on their own

    def note_write(self, obj: Obj) -> None:
        namespace = obj.get("metadata", {}).get("namespace")
        informer = self._informers.get(str(namespace))
        if informer is not None:
            informer.note_write(obj)


class Unwatched(Informer):
    """A cluster-scoped resource a process restricted to a few namespaces may not list:
    read as always empty and always synced, so that nothing waits for it and every
    reader sees "not found". It makes no request."""

    def __init__(self, resource: Resource) -> None:
        # Not Informer.__init__: this one lists and watches nothing.
        self.resource = resource
        self.store = Store()
        self.synced = asyncio.Event()
        self.synced.set()
        self._handlers = []

    def add_handler(self, handler: Handler) -> None:
        """Nothing is ever delivered."""

    async def wait_synced(self) -> None:
        return None

    async def run(self) -> None:
        await asyncio.Event().wait()

    def note_write(self, obj: Obj) -> None:
        """Nothing is cached."""
