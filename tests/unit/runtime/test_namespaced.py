"""Informers of several namespaces read as one: each namespace's list and watch fills its
own store; reads find an object by its key's namespace or across all; handlers hear
every namespace; synced waits for the slowest; the view refuses writes."""

from __future__ import annotations

import asyncio

import pytest

from runtime.cache import Informer, Resource, label_index
from runtime.cache.namespaced import Namespaced
from runtime.clock import LoopClock
from tests.unit.runtime.scripted_api import HANG, ScriptedApi, event, obj, page

pytestmark = pytest.mark.looptime

JOBS = Resource("batch", "v1", "jobs")
INDEX = {"team": label_index("team")}


def _informer(api: ScriptedApi) -> Informer:
    return Informer(api, JOBS, clock=LoopClock(), indexers=INDEX, watch_list=False)


async def test_two_namespaces_read_as_one() -> None:
    a = ScriptedApi(
        lists=[page([obj("x", 5, namespace="a", team="red")], rv=10)],
        watches=[[event("ADDED", obj("y", 11, namespace="a", team="blue")), HANG]],
    )
    b = ScriptedApi(lists=[page([obj("x", 7, namespace="b", team="red")], rv=20)], watches=[[HANG]])
    both = Namespaced({"a": _informer(a), "b": _informer(b)})
    heard: list[str] = []
    both.add_handler(
        lambda old, new: heard.append(f"{(new or old or {})['metadata']['namespace']}")
    )
    async with both.running():
        await both.wait_synced()
        async with asyncio.timeout(100):
            while len(both.store) < 3:  # noqa: ASYNC110 -- virtual time
                await asyncio.sleep(0.01)
    store = both.store
    assert store.get("a/x") is not None
    assert store.get("b/x") is not None
    assert store.get("c/x") is None  # a namespace not watched
    assert "a/y" in store
    assert sorted(o["metadata"]["namespace"] for o in store.by_index("team", "red")) == ["a", "b"]
    assert sorted(store.keys()) == ["a/x", "a/y", "b/x"]
    assert store.index_values("team") == ["blue", "red"]
    assert sorted(heard) == ["a", "a", "b"]


async def test_synced_waits_for_every_namespace() -> None:
    a = ScriptedApi(lists=[page([], rv=1)], watches=[[HANG]])
    slow = ScriptedApi(lists=[], watches=[])  # never answers its list
    both = Namespaced({"a": _informer(a), "b": _informer(slow)})
    async with both.running():
        await asyncio.sleep(5)
        assert not both.synced.is_set()


def test_the_view_refuses_writes() -> None:
    both = Namespaced({"a": _informer(ScriptedApi(lists=[], watches=[]))})
    with pytest.raises(TypeError):
        both.store.upsert(obj("x", 1, namespace="a"))


async def test_a_noted_write_lands_in_its_namespace() -> None:
    a = ScriptedApi(lists=[page([], rv=1)], watches=[[HANG]])
    b = ScriptedApi(lists=[page([], rv=1)], watches=[[HANG]])
    both = Namespaced({"a": _informer(a), "b": _informer(b)})
    async with both.running():
        await both.wait_synced()
        both.note_write(obj("x", 2, namespace="b"))
        both.note_write(obj("z", 2, namespace="elsewhere"))  # not watched: dropped
    assert both.store.keys() == ["b/x"]
