"""List, then watch from the list's resourceVersion, forever.

The reflector yields a `Listed` snapshot whenever it (re)lists, then every
watch event, bookmarks included. Its one invariant: the resourceVersion it
watches from is that of the last thing it yielded, so a reconnect replays
nothing already delivered and skips nothing not yet delivered.

A (re)list is a streaming list first (client-go's WatchList: a watch with
`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`, the current
objects as ADDED events, then a bookmark annotated `k8s.io/initial-events-end`),
so no answer ever holds the whole collection in one body; the watch then
carries on on the same connection. An API server that refuses it, or ends the
stream before that bookmark, gets a paginated consistent list instead
(`limit`, `resourceVersion` unset). `resourceVersion=0` is never asked for:
the watch cache ignores `limit` there and answers with one unbounded body.

  410 Gone/Expired (answer or ERROR event)  -> relist, at once
  connection errors, timeouts, 429, 5xx     -> back off, re-watch from the last version
  the same 5xx for one version, 3 times     -> back off, relist (the version itself is the trouble)
  the server ends the watch (timeoutSeconds) -> re-watch from the last version, at once
  a silent stream                           -> re-watch from the last version, at once
  any other error                           -> back off, relist (the stream's state is unknown)"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from runtime.cache.backoff import backoff_delay
from runtime.cache.listing import PAGE_SIZE, Listed, ListTransport, list_all
from runtime.cache.resource import Obj, Resource, Transform, object_key
from runtime.cache.watchstream import (
    METADATA_ONLY_LIST,
    METADATA_ONLY_WATCH,
    Bookmark,
    SilentStream,
    StreamTransport,
    Watched,
    watch_once,
)
from runtime.clock import Clock
from runtime.errors import ApiError, is_transient

logger = logging.getLogger(__name__)

Delta = Listed | Watched | Bookmark

# client-go's choice: watches last 5 to 10 minutes, randomised so that many
# watchers do not all reconnect in the same second.
WATCH_SECONDS_MIN = 300
WATCH_SECONDS_MAX = 600
# How much longer than timeoutSeconds a stream may stay silent before it is presumed dead
# (a half-open TCP connection never ends on its own).
SILENCE_MARGIN_SECONDS = 30.0
# A watch the server ends sooner than this with nothing sent counts as a failure,
# so a proxy that drops every connection at once cannot make us hot-loop.
EMPTY_WATCH_SECONDS = 1.0
# A server error that repeats for one resourceVersion is about that version (etcd
# answers 500 for a watch from just before its compaction point): relist instead.
MAX_SERVER_ERRORS_PER_VERSION = 3


class EmptyWatch(ConnectionError):
    """The server ended a watch at once without sending anything."""


class ListWatchTransport(ListTransport, StreamTransport, Protocol):
    pass


@dataclass(frozen=True, slots=True)
class Selection:
    """Which objects of a resource: one namespace or all, and selectors as the API takes them."""

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    page_size: int = PAGE_SIZE
    # PartialObjectMetadata: metadata only, for resources whose contents are read on demand.
    metadata_only: bool = False

    def params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        return params

    def accept(self, *, watch: bool) -> str:
        if not self.metadata_only:
            return "application/json"
        return METADATA_ONLY_WATCH if watch else METADATA_ONLY_LIST


def _keep(obj: Obj) -> Obj:
    return obj


class WatchListRefused(Exception):
    """The API server would not serve a streaming list; a paginated list replaces it."""


@dataclass
class _Position:
    """Where the reflector stands. `version` empty means "must (re)list first"."""

    version: str = ""
    failures: int = 0
    # Cleared for good once the server refuses a streaming list outright (4xx).
    watch_list: bool = True
    # Consecutive 5xx answers to watches from `version`.
    server_errors: int = 0
    rng: random.Random = field(default_factory=random.Random)


async def reflect(
    transport: ListWatchTransport,
    resource: Resource,
    *,
    clock: Clock,
    selection: Selection = Selection(),
    transform: Transform | None = None,
    watch_list: bool = True,
) -> AsyncGenerator[Delta, None]:
    """Every change of the selected objects, forever; a `Listed` snapshot after each (re)list.

    `transform` runs on every object as it is decoded, before anything holds it:
    the place to drop the fields nobody reads."""
    transform = transform or _keep
    path = resource.path(selection.namespace)
    position = _Position(watch_list=watch_list)
    while True:
        try:
            if not position.version and position.watch_list:
                try:
                    async for delta in _stream(transport, path, selection, position, transform):
                        yield delta
                    continue
                except WatchListRefused as refused:
                    logger.info("%s: %s; listing page by page", resource.plural, refused)
            if not position.version:
                yield await _list(transport, path, selection, position, transform)
            async for delta in _watch(transport, path, selection, position, clock, transform):
                yield delta
        except ApiError as error:
            await _recover_from_api_error(error, resource, position, clock)
        except SilentStream as error:
            logger.info("watch of %s went silent (%s); re-watching", resource.plural, error)
        except Exception as error:
            if not is_transient(error):
                raise
            await _pause(position, clock, None, f"{resource.plural}: {error!r}")


async def _list(
    transport: ListTransport,
    path: str,
    selection: Selection,
    position: _Position,
    transform: Transform,
) -> Listed:
    # Always the most recent state, page by page: a consistent read honours `limit`.
    listed = await list_all(
        transport,
        path,
        resource_version="",
        selectors=selection.params(),
        page_size=selection.page_size,
        transform=transform,
        accept=selection.accept(watch=False),
    )
    _listed(position, listed.resource_version)
    return listed


def _listed(position: _Position, version: str) -> None:
    position.version = version
    position.failures = 0
    position.server_errors = 0


async def _stream(
    transport: StreamTransport,
    path: str,
    selection: Selection,
    position: _Position,
    transform: Transform,
) -> AsyncIterator[Listed | Watched | Bookmark]:
    """A streaming list: the initial events gathered into one `Listed`, then the watch goes on.

    Nothing is yielded, and the position does not move, until the end bookmark: a
    failure before it leaves the reflector where it was, with nothing half-delivered."""
    seconds = position.rng.randint(WATCH_SECONDS_MIN, WATCH_SECONDS_MAX)
    params = {
        **selection.params(),
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(seconds),
    }
    initial: dict[str, Obj] | None = {}
    stream = watch_once(
        transport,
        path,
        params=params,
        silence=seconds + SILENCE_MARGIN_SECONDS,
        accept=selection.accept(watch=True),
    )
    try:
        async for delta in stream:
            if initial is None:
                position.version = delta.resource_version
                yield _transformed(delta, transform)
            elif isinstance(delta, Bookmark) and delta.initial_events_end:
                listed = Listed(list(initial.values()), delta.resource_version)
                initial = None
                _listed(position, listed.resource_version)
                yield listed
            elif isinstance(delta, Watched):
                key = object_key(delta.object)
                if delta.type == "DELETED":
                    initial.pop(key, None)
                else:
                    initial[key] = transform(delta.object)
    except ApiError as error:
        if initial is not None and 400 <= error.status < 500 and error.status not in (410, 429):
            position.watch_list = False
            raise WatchListRefused(f"streaming list refused: {error}") from None
        raise
    finally:
        await stream.aclose()
    if initial is not None:
        # An API server that ignores sendInitialEvents never sends the end bookmark.
        position.watch_list = False
        raise WatchListRefused("the stream ended before its initial-events-end bookmark")


def _transformed(delta: Watched | Bookmark, transform: Transform) -> Watched | Bookmark:
    if isinstance(delta, Bookmark):
        return delta
    return Watched(delta.type, transform(delta.object), delta.resource_version)


async def _watch(
    transport: StreamTransport,
    path: str,
    selection: Selection,
    position: _Position,
    clock: Clock,
    transform: Transform,
) -> AsyncIterator[Watched | Bookmark]:
    seconds = position.rng.randint(WATCH_SECONDS_MIN, WATCH_SECONDS_MAX)
    params = {
        **selection.params(),
        "watch": "true",
        "allowWatchBookmarks": "true",
        "resourceVersion": position.version,
        "timeoutSeconds": str(seconds),
    }
    silence = seconds + SILENCE_MARGIN_SECONDS
    started = clock.monotonic()
    delivered = False
    accept = selection.accept(watch=True)
    async for delta in watch_once(transport, path, params=params, silence=silence, accept=accept):
        # Updated before the yield: if the consumer is cancelled while holding
        # this event, it has still been delivered.
        position.version = delta.resource_version
        position.failures = 0
        position.server_errors = 0
        delivered = True
        yield _transformed(delta, transform)
    if not delivered and clock.monotonic() - started < EMPTY_WATCH_SECONDS:
        raise EmptyWatch(f"watch from {position.version} ended at once")


async def _recover_from_api_error(
    error: ApiError, resource: Resource, position: _Position, clock: Clock
) -> None:
    if error.status == 410 and position.version:
        logger.info("%s: resourceVersion %s is gone; relisting", resource.plural, position.version)
        position.version = ""
        return
    # A 410 while listing (continue tokens that keep expiring) falls through to a pause.
    if error.status >= 500:
        position.server_errors += 1
    if not is_transient(error) or position.server_errors >= MAX_SERVER_ERRORS_PER_VERSION:
        # E.g. 403 while RBAC is being granted, or a bad selector: the stream's
        # state is unknown, so start again from a list after a pause.
        logger.warning("%s: %s; relisting after a pause", resource.plural, error)
        position.version = ""
    await _pause(position, clock, error.retry_after, f"{resource.plural}: {error}")


async def _pause(position: _Position, clock: Clock, at_least: float | None, why: str) -> None:
    position.failures += 1
    delay = max(backoff_delay(position.failures, rng=position.rng), at_least or 0.0)
    logger.info("%s; retrying in %.1f s", why, delay)
    await clock.sleep(delay)
