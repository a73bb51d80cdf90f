"""One watch request, as a stream of decoded events.

Stacked async generators, one job each, innermost first:
`_until_silent` ends a connection that stopped sending bytes; `watch_once`
decodes each line with orjson and turns ERROR events into exceptions. Neither
retries: reconnecting is the reflector's job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import orjson

from runtime.cache.resource import Obj
from runtime.errors import ApiError

# The Accept headers that make the API server send PartialObjectMetadata: every
# object's metadata, none of its contents (controller-runtime's metadata-only watches).
METADATA_ONLY_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONLY_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
# Marks the bookmark that ends a streaming list's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class StreamTransport(Protocol):
    def stream(
        self, path: str, *, params: Mapping[str, str], accept: str = "application/json"
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


class SilentStream(TimeoutError):
    """The server sent nothing for longer than it promised to keep the watch open."""


@dataclass(frozen=True, slots=True)
class Watched:
    """An ADDED, MODIFIED or DELETED event with the object as the server sent it."""

    type: str
    object: Obj
    resource_version: str


@dataclass(frozen=True, slots=True)
class Bookmark:
    """The server's promise: every change up to `resource_version` has been sent.

    `initial_events_end`: a streaming list's initial events are all in."""

    resource_version: str
    initial_events_end: bool = False


async def watch_once(
    transport: StreamTransport,
    path: str,
    *,
    params: Mapping[str, str],
    silence: float,
    accept: str = "application/json",
) -> AsyncGenerator[Watched | Bookmark, None]:
    """The events of one watch connection, until the server ends it.

    Raises `ApiError` for a non-2xx answer or an ERROR event (410 included),
    `SilentStream` when no line arrives for `silence` seconds."""
    async with transport.stream(path, params=params, accept=accept) as lines:
        async for line in _until_silent(lines, silence):
            event = orjson.loads(line)
            kind = event["type"]
            obj = event["object"]
            if kind == "ERROR":
                raise ApiError.from_status(obj)
            metadata = obj["metadata"]
            version = metadata["resourceVersion"]
            if kind == "BOOKMARK":
                annotations = metadata.get("annotations") or {}
                yield Bookmark(version, annotations.get(INITIAL_EVENTS_END) == "true")
            else:
                yield Watched(kind, obj, version)


async def _until_silent(lines: AsyncIterator[bytes], silence: float) -> AsyncIterator[bytes]:
    iterator = aiter(lines)
    watchdog = _Watchdog(silence)
    try:
        while True:
            watchdog.reading()
            try:
                line = await anext(iterator)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if watchdog.bit():
                    raise SilentStream(f"no data for {silence:.0f} s") from None
                raise
            watchdog.idle()
            yield line
    finally:
        watchdog.stop()


class _Watchdog:
    """Cancels the reading task when one read has waited `silence` seconds.

    The deadline covers only the wait for the next line, never the consumer's
    work between lines. One timer per `silence` seconds at most, instead of one
    deadline per line: a burst of 10,000 events costs a few callbacks, not 10,000
    timer handles. It runs on the event loop's clock, not the controller's
    (possibly scaled) Clock: the server keeps the watch open in real seconds."""

    def __init__(self, silence: float) -> None:
        self._silence = silence
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        # Loop time at which the current read began; None while the consumer has control.
        self._since: float | None = None
        # The read start the pending timer was set for (asyncio may run a timer a
        # clock tick early, so "is it the same read" is asked, not "is it late enough").
        self._armed_for: float | None = None
        self._fired = False
        self._timer = self._loop.call_later(silence, self._check)

    def reading(self) -> None:
        self._since = self._loop.time()

    def idle(self) -> None:
        self._since = None

    def bit(self) -> bool:
        """Whether the cancellation just received was ours (then it is consumed)."""
        if not self._fired or self._task is None:
            return False
        self._fired = False
        # Another cancel arrived as well: let that one through.
        return self._task.uncancel() == 0

    def stop(self) -> None:
        self._timer.cancel()

    def _check(self) -> None:
        since = self._since
        if since is not None and since == self._armed_for and self._task is not None:
            self._fired = True
            self._task.cancel()
            return
        self._armed_for = since
        due = self._loop.time() + self._silence if since is None else since + self._silence
        self._timer = self._loop.call_at(due, self._check)
