"""Streaming lists (WatchList) and the paginated fallback, on scripted answers, in virtual time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from runtime.cache import Delta, Listed, Obj, Resource, Selection, Watched, reflect
from runtime.cache.watchstream import METADATA_ONLY_LIST, METADATA_ONLY_WATCH
from runtime.clock import LoopClock
from runtime.errors import ApiError
from tests.unit.runtime.scripted_api import (
    ScriptedApi,
    WatchScript,
    bookmark,
    event,
    gone,
    obj,
    page,
)

pytestmark = pytest.mark.looptime

JOBS = Resource("batch", "v1", "jobs")


def initial_events_end(rv: int) -> bytes:
    metadata = {"resourceVersion": str(rv), "annotations": {"k8s.io/initial-events-end": "true"}}
    return event("BOOKMARK", {"kind": "Job", "metadata": metadata})


class AcceptRecordingApi(ScriptedApi):
    """Remembers the Accept header of every call, in order."""

    def __init__(self, **scripts: Any) -> None:
        super().__init__(**scripts)
        self.accepts: list[str] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        self.accepts.append(accept)
        return await super().request(method, path, params=params, accept=accept)

    @asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str], accept: str = "application/json"
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        self.accepts.append(accept)
        async with super().stream(path, params=params, accept=accept) as lines:
            yield lines


async def take(api: ScriptedApi, count: int, **options: Any) -> list[Delta]:
    deltas: list[Delta] = []
    stream = reflect(api, JOBS, clock=LoopClock(), **options)
    try:
        async with asyncio.timeout(50_000):
            async for delta in stream:
                deltas.append(delta)
                if len(deltas) == count:
                    break
    finally:
        await stream.aclose()
    return deltas


def names(listed: Delta) -> list[str]:
    assert isinstance(listed, Listed)
    return sorted(o["metadata"]["name"] for o in listed.objects)


async def test_a_streaming_list_gathers_the_initial_events_then_the_watch_goes_on() -> None:
    api = ScriptedApi(
        watches=[
            [
                event("ADDED", obj("a", 5)),
                event("ADDED", obj("b", 7)),
                initial_events_end(10),
                event("MODIFIED", obj("a", 11)),
            ]
        ]
    )
    listed, modified = await take(api, 2, selection=Selection(label_selector="x=y"))
    assert isinstance(listed, Listed)
    assert (names(listed), listed.resource_version) == (["a", "b"], "10")
    assert isinstance(modified, Watched)
    assert (modified.type, modified.resource_version) == ("MODIFIED", "11")
    assert api.params_of("list") == []  # one connection: no list at all
    [params] = api.params_of("watch")
    assert "resourceVersion" not in params
    assert {k: params[k] for k in params if k != "timeoutSeconds"} == {
        "labelSelector": "x=y",
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }


async def test_after_the_stream_ends_the_next_watch_starts_from_the_last_version() -> None:
    api = ScriptedApi(
        watches=[
            [event("ADDED", obj("a", 5)), initial_events_end(10), bookmark(14)],
            [event("DELETED", obj("a", 15))],
        ]
    )
    listed, mark, deleted = await take(api, 3)
    assert [d.resource_version for d in (listed, mark, deleted)] == ["10", "14", "15"]
    second = api.params_of("watch")[1]
    assert second["resourceVersion"] == "14"
    assert "sendInitialEvents" not in second


async def test_a_refused_streaming_list_falls_back_to_pages_and_is_not_asked_again() -> None:
    api = ScriptedApi(
        lists=[page([obj("a", 5)], rv=10, token="t"), page([obj("b", 6)], rv=10), page([], rv=30)],
        watches=[
            ApiError(422, "Invalid", "sendInitialEvents is forbidden"),
            [event("ADDED", obj("c", 11)), gone()],
        ],
    )
    first, added, relisted = await take(api, 3)
    assert names(first) == ["a", "b"]
    assert isinstance(added, Watched)
    assert isinstance(relisted, Listed)  # after the 410: a list again, not a stream
    assert [p.get("sendInitialEvents") for p in api.params_of("watch")] == ["true", None]
    assert [p.get("resourceVersion") for p in api.params_of("list")] == [None, None, None]


async def test_a_stream_that_ends_before_its_end_bookmark_falls_back_to_a_list() -> None:
    # An API server that ignores sendInitialEvents sends objects but never the marker.
    api = ScriptedApi(
        lists=[page([obj("a", 5)], rv=10)],
        watches=[[event("ADDED", obj("a", 5))], [event("ADDED", obj("b", 11))]],
    )
    listed, added = await take(api, 2)
    assert (names(listed), listed.resource_version) == (["a"], "10")
    assert isinstance(added, Watched)
    assert api.params_of("watch")[1]["resourceVersion"] == "10"


async def test_a_failure_mid_stream_delivers_nothing_and_streams_again() -> None:
    api = ScriptedApi(
        watches=[
            [event("ADDED", obj("a", 5)), ConnectionResetError("reset")],
            [event("ADDED", obj("a", 5)), event("ADDED", obj("b", 6)), initial_events_end(10)],
        ]
    )
    [listed] = await take(api, 1)
    assert names(listed) == ["a", "b"]
    assert [p.get("sendInitialEvents") for p in api.params_of("watch")] == ["true", "true"]


def keep_name_only(o: Obj) -> Obj:
    return {"metadata": {"name": o["metadata"]["name"], "namespace": "ns", "resourceVersion": "1"}}


@pytest.mark.parametrize("watch_list", [True, False])
async def test_the_transform_sees_every_object_before_it_is_delivered(watch_list: bool) -> None:
    watches: list[WatchScript] = []
    if watch_list:
        watches.append([event("ADDED", obj("a", 5, app="x")), initial_events_end(10)])
    watches.append([event("ADDED", obj("b", 11, app="x"))])
    api = ScriptedApi(lists=[page([obj("a", 5, app="x")], rv=10)], watches=watches)
    listed, added = await take(api, 2, transform=keep_name_only, watch_list=watch_list)
    assert isinstance(listed, Listed)
    assert isinstance(added, Watched)
    assert [*listed.objects, added.object] == [
        keep_name_only(obj("a", 5)),
        keep_name_only(obj("b", 11)),
    ]


@pytest.mark.parametrize("watch_list", [True, False])
async def test_metadata_only_asks_for_partial_object_metadata(watch_list: bool) -> None:
    api = AcceptRecordingApi(
        lists=[page([obj("a", 5)], rv=10)],
        watches=([[initial_events_end(10)]] if watch_list else [])
        + [[event("ADDED", obj("b", 11))]],
    )
    await take(api, 2, selection=Selection(metadata_only=True), watch_list=watch_list)
    expected = [METADATA_ONLY_WATCH] if watch_list else [METADATA_ONLY_LIST, METADATA_ONLY_WATCH]
    assert api.accepts[: len(expected)] == expected
