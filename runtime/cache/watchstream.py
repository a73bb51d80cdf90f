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


class StreamTransport(Protocol):
    def stream(
        self, path: str, *, params: Mapping[str, str]
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
    """The server's promise: every change up to `resource_version` has been sent."""

    resource_version: str


async def watch_once(
    transport: StreamTransport,
    path: str,
    *,
    params: Mapping[str, str],
    silence: float,
) -> AsyncGenerator[Watched | Bookmark, None]:
    """The events of one watch connection, until the server ends it.

    Raises `ApiError` for a non-2xx answer or an ERROR event (410 included),
    `SilentStream` when no line arrives for `silence` seconds."""
    async with transport.stream(path, params=params) as lines:
        async for line in _until_silent(lines, silence):
            event = orjson.loads(line)
            kind = event["type"]
            obj = event["object"]
            if kind == "ERROR":
                raise ApiError.from_status(obj)
            version = obj["metadata"]["resourceVersion"]
            if kind == "BOOKMARK":
                yield Bookmark(version)
            else:
                yield Watched(kind, obj, version)


async def _until_silent(lines: AsyncIterator[bytes], silence: float) -> AsyncIterator[bytes]:
    # The deadline covers only the wait for the next line, never the consumer's
    # work between lines. It runs on the event loop's clock, not the controller's
    # (possibly scaled) Clock: the server keeps the watch open in real seconds.
    iterator = aiter(lines)
    while True:
        deadline = asyncio.timeout(silence)
        try:
            async with deadline:
                line = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            if deadline.expired():
                raise SilentStream(f"no data for {silence:.0f} s") from None
            raise
        yield line
