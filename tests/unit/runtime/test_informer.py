"""The informer on scripted streams: store contents, handler calls, the synced signal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime.cache import Informer, Resource, Watched, label_index
from runtime.clock import LoopClock
from tests.unit.runtime.scripted_api import (
    HANG,
    ScriptedApi,
    bookmark,
    error_event,
    event,
    obj,
    page,
)

pytestmark = pytest.mark.looptime

JOBS = Resource("batch", "v1", "jobs")

Call = tuple[str | None, str | None]


def recorder(calls: list[Call]) -> Any:
    def handler(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        def describe(o: dict[str, Any] | None) -> str | None:
            return (
                None if o is None else f"{o['metadata']['name']}@{o['metadata']['resourceVersion']}"
            )

        calls.append((describe(old), describe(new)))

    return handler


async def until(condition: Any) -> None:
    """Polls in virtual time: a bookmark changes the store without any handler call."""
    async with asyncio.timeout(1000):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_nothing_runs_before_the_informer_is_entered() -> None:
    api = ScriptedApi(lists=[page([], rv=1)])
    informer = Informer(api, JOBS, clock=LoopClock(), watch_list=False)
    await asyncio.sleep(1)
    assert api.calls == []
    assert not informer.synced.is_set()


async def test_handlers_see_adds_updates_and_deletes_in_order() -> None:
    calls: list[Call] = []
    api = ScriptedApi(
        lists=[page([obj("a", 5)], rv=10)],
        watches=[
            [
                event("ADDED", obj("b", 11)),
                event("MODIFIED", obj("a", 12)),
                event("DELETED", obj("b", 13)),
                bookmark(14),
                HANG,
            ]
        ],
    )
    informer = Informer(api, JOBS, clock=LoopClock(), watch_list=False)
    informer.add_handler(recorder(calls))
    async with informer:
        await informer.wait_synced()
        await until(lambda: informer.store.resource_version == "14")
    assert calls == [(None, "a@5"), (None, "b@11"), ("a@5", "a@12"), ("b@11", None)]
    assert informer.store.keys() == ["ns/a"]
    assert informer.store.version_of("ns/a") == "12"


async def test_synced_is_set_once_the_first_list_is_in_the_store() -> None:
    seen_at_sync: list[int] = []
    api = ScriptedApi(lists=[page([obj("a", 1), obj("b", 2)], rv=10)])
    informer = Informer(api, JOBS, clock=LoopClock(), watch_list=False)
    async with informer:
        await informer.wait_synced()
        seen_at_sync.append(len(informer.store))
    assert seen_at_sync == [2]


async def test_a_relist_after_410_delivers_deletions_of_vanished_objects() -> None:
    calls: list[Call] = []
    api = ScriptedApi(
        lists=[page([obj("a", 1), obj("b", 2)], rv=10), page([obj("a", 1), obj("c", 30)], rv=31)],
        watches=[[error_event(410, "Expired")], [HANG]],
    )
    informer = Informer(
        api, JOBS, clock=LoopClock(), watch_list=False, indexers={"app": label_index("app")}
    )
    informer.add_handler(recorder(calls))
    async with informer:
        await until(lambda: informer.store.resource_version == "31")
    # "a" is unchanged, so no duplicate event for it.
    assert calls[2:] == [(None, "c@30"), ("b@2", None)]
    assert sorted(informer.store.keys()) == ["ns/a", "ns/c"]


async def test_a_failing_handler_does_not_stop_the_others_or_the_cache() -> None:
    calls: list[Call] = []

    def broken(old: Any, new: Any) -> None:
        raise RuntimeError("bug in a handler")

    api = ScriptedApi(lists=[page([obj("a", 1)], rv=10)], watches=[[event("ADDED", obj("b", 11))]])
    informer = Informer(api, JOBS, clock=LoopClock(), watch_list=False)
    informer.add_handler(broken)
    informer.add_handler(recorder(calls))
    async with informer:
        await until(lambda: len(informer.store) == 2)
    assert calls == [(None, "a@1"), (None, "b@11")]


async def test_leaving_the_block_stops_the_watch() -> None:
    api = ScriptedApi(lists=[page([], rv=10)])
    async with Informer(api, JOBS, clock=LoopClock(), watch_list=False) as informer:
        await informer.wait_synced()
    calls = len(api.calls)
    await asyncio.sleep(3600)
    assert len(api.calls) == calls


async def test_a_noted_write_is_cached_at_once_and_its_watch_event_changes_nothing() -> None:
    api = ScriptedApi(lists=[page([obj("a", 5)], rv=10)], watches=[[HANG]])
    calls: list[Call] = []
    informer = Informer(api, JOBS, clock=LoopClock(), watch_list=False)
    informer.add_handler(recorder(calls))
    async with informer:
        await informer.wait_synced()
        informer.note_write(obj("a", 12))
        assert informer.store.version_of("ns/a") == "12"
        informer._apply(Watched("MODIFIED", obj("a", 11), "11"))  # behind the write: ignored
        informer._apply(Watched("MODIFIED", obj("a", 12), "12"))  # the write itself: no change
        informer.note_write(obj("a", 9))  # an answer older than the cache: ignored
    assert calls == [(None, "a@5"), ("a@5", "a@12")]
    assert informer.store.version_of("ns/a") == "12"


async def test_a_write_noted_after_the_watch_brought_its_deletion_stays_deleted() -> None:
    # Removing the last finalizer: the API server deletes the object at once, and the
    # watch's DELETED can be applied before the PATCH's answer is noted. The answer is
    # then older than the store: noting it would bring back an object that is gone.
    api = ScriptedApi(lists=[page([obj("a", 5)], rv=10)], watches=[[HANG]])
    calls: list[Call] = []
    informer = Informer(api, JOBS, clock=LoopClock(), watch_list=False)
    informer.add_handler(recorder(calls))
    async with informer:
        await informer.wait_synced()
        informer._apply(Watched("DELETED", obj("a", 13), "13"))
        informer.note_write(obj("a", 12))
        informer.note_write(obj("new", 11))  # created, and deleted by the time it is noted
    assert calls == [(None, "a@5"), ("a@5", None)]
    assert "ns/a" not in informer.store
    assert "ns/new" not in informer.store
