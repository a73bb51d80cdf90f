"""One watch connection: decoding, ERROR events, and the silence watchdog, in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from runtime.cache import Bookmark, SilentStream, Watched, watch_once
from runtime.errors import ApiError
from tests.unit.runtime.scripted_api import (
    HANG,
    ScriptedApi,
    Step,
    bookmark,
    error_event,
    event,
    obj,
)

pytestmark = pytest.mark.looptime

PATH = "/apis/batch/v1/jobs"


def api_with(*steps: Step) -> ScriptedApi:
    return ScriptedApi(watches=[list(steps)])


async def drain(api: ScriptedApi, seen: list[str]) -> None:
    async for delta in watch_once(api, PATH, params={}, silence=60):
        seen.append(delta.resource_version)


async def test_events_and_bookmarks_are_decoded_with_their_versions() -> None:
    api = api_with(event("ADDED", obj("a", 3)), bookmark(7), event("DELETED", obj("a", 9)))
    deltas = [d async for d in watch_once(api, PATH, params={}, silence=60)]
    assert [type(d) for d in deltas] == [Watched, Bookmark, Watched]
    assert [d.resource_version for d in deltas] == ["3", "7", "9"]
    first = deltas[0]
    assert isinstance(first, Watched)
    assert first.type == "ADDED"
    assert first.object["metadata"]["name"] == "a"


async def test_an_error_event_raises_its_status() -> None:
    api = api_with(event("ADDED", obj("a", 3)), error_event(410, "Expired"))
    seen: list[str] = []
    with pytest.raises(ApiError) as failure:
        await drain(api, seen)
    assert seen == ["3"]
    assert (failure.value.status, failure.value.reason) == (410, "Expired")


async def test_silence_longer_than_the_limit_ends_the_stream() -> None:
    api = api_with(event("ADDED", obj("a", 3)), 59.0, bookmark(4), HANG)
    loop = asyncio.get_running_loop()
    started = loop.time()
    seen: list[str] = []
    with pytest.raises(SilentStream):
        await drain(api, seen)
    assert seen == ["3", "4"]
    assert loop.time() - started == pytest.approx(59 + 60, abs=0.01)


async def test_a_slow_consumer_is_not_mistaken_for_a_silent_server() -> None:
    api = api_with(event("ADDED", obj("a", 3)), bookmark(4), bookmark(5))
    seen: list[str] = []
    async for delta in watch_once(api, PATH, params={}, silence=60):
        seen.append(delta.resource_version)
        await asyncio.sleep(500)  # holding each event far longer than the limit
    assert seen == ["3", "4", "5"]


async def test_cancelling_the_reader_is_a_cancellation_not_silence() -> None:
    api = api_with(HANG)

    async def read() -> None:
        async for _ in watch_once(api, PATH, params={}, silence=60):
            pass

    task = asyncio.create_task(read())
    await asyncio.sleep(30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_timeout_from_below_is_not_reported_as_silence() -> None:
    api = api_with(TimeoutError("socket read"))
    with pytest.raises(TimeoutError) as failure:
        await drain(api, [])
    assert not isinstance(failure.value, SilentStream)
