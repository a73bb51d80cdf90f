"""An informer: a reflector feeding a store, and the store's changes fanned out to handlers.

Lifecycle: nothing runs until `async with informer:` (or `await informer.run()`
under the caller's task group); leaving the block stops the watch. `synced` is
set once the first complete list is in the store and its changes were handed
to the handlers: from then on the store is a usable, if possibly stale, view."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

import anyio

from runtime.cache.listing import Listed
from runtime.cache.reflector import Delta, ListWatchTransport, Selection, reflect
from runtime.cache.resource import (
    Obj,
    Resource,
    Transform,
    is_older,
    object_key,
    resource_version,
)
from runtime.cache.store import Change, IndexFunc, Store
from runtime.cache.watchstream import Watched
from runtime.clock import Clock
from runtime.lifecycle import RunsInContext

logger = logging.getLogger(__name__)

# Called with (None, new) on add, (old, new) on update, (old, None) on delete.
# Synchronous and quick (enqueue a key, nothing more): it runs inside the watch loop.
Handler = Callable[[Obj | None, Obj | None], None]


class Informer(RunsInContext):
    def __init__(
        self,
        transport: ListWatchTransport,
        resource: Resource,
        *,
        clock: Clock,
        selection: Selection = Selection(),  # noqa: B008 -- frozen, so sharing is safe
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = None,
        watch_list: bool = True,
    ) -> None:
        self.resource = resource
        self.store = Store(indexers)
        self.synced = asyncio.Event()
        self._transport = transport
        self._clock = clock
        self._selection = selection
        self._transform = transform
        self._watch_list = watch_list
        self._handlers: list[Handler] = []

    def add_handler(self, handler: Handler) -> None:
        """Register before the informer runs, or the handler misses the initial adds."""
        self._handlers.append(handler)

    async def wait_synced(self) -> None:
        await self.synced.wait()

    async def run(self) -> None:
        """Keep the store current until cancelled."""
        deltas = reflect(
            self._transport,
            self.resource,
            clock=self._clock,
            selection=self._selection,
            transform=self._transform,
            watch_list=self._watch_list,
        )
        try:
            async for delta in deltas:
                self._apply(delta)
        finally:
            await deltas.aclose()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Informer]:
        async with anyio.create_task_group() as group:
            group.start_soon(self.run, name=f"informer {self.resource.plural}")
            try:
                yield self
            finally:
                group.cancel_scope.cancel()

    def note_write(self, obj: Obj) -> None:
        """An object as the API server returned it after this process wrote it.

        Cached at once, handlers told (client-go's mutation cache): the next reconcile
        reads what was written instead of a version the write has replaced (which
        would only earn a 409), and when the watch brings the same version it changes
        nothing and wakes no one.

        An answer the watch has already passed is dropped: the store then holds that
        version or a later one, and if it holds nothing the object was deleted since (a
        write that removes the last finalizer races the watch's DELETED)."""
        obj = obj if self._transform is None else self._transform(obj)
        version, reached = resource_version(obj), self.store.resource_version
        if version == reached or is_older(version, reached):
            return
        cached = self.store.get(object_key(obj))
        if cached is not None and not is_older(resource_version(cached), version):
            return
        change = self.store.upsert(obj)
        if change is not None:
            self._dispatch(change)

    def _apply(self, delta: Delta) -> None:
        store = self.store
        if isinstance(delta, Watched):
            cached = store.get(object_key(delta.object))
            if (
                delta.type != "DELETED"
                and cached is not None
                and is_older(delta.resource_version, resource_version(cached))
            ):
                # The watch is behind a write this process noted already.
                store.reached(delta.resource_version)
                return
            change = (
                store.delete(delta.object)
                if delta.type == "DELETED"
                else store.upsert(delta.object)
            )
            store.reached(delta.resource_version)
            if change is not None:
                self._dispatch(change)
        elif isinstance(delta, Listed):
            for change in store.replace(delta.objects, delta.resource_version):
                self._dispatch(change)
            self.synced.set()
        else:
            store.reached(delta.resource_version)

    def _dispatch(self, change: Change) -> None:
        for handler in self._handlers:
            try:
                handler(change.old, change.new)
            except Exception:
                # A broken handler must not stop the cache for every other handler.
                logger.exception("%s handler %r failed", self.resource.plural, handler)
