"""The de-duplicating queue: order, de-duplication, one worker per item, shutdown."""

from __future__ import annotations

import anyio
import pytest

from runtime.workqueue import SHUTDOWN, WorkQueue

pytestmark = pytest.mark.looptime


async def test_items_come_out_in_add_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]


async def test_adding_a_queued_item_again_is_a_no_op() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert len(q) == 0


async def test_item_readded_while_processing_waits_for_done_then_runs_again() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    q.add("a")
    # Not handed to a second worker while the first has it.
    assert len(q) == 0
    assert q.is_processing("a")
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_item_not_readded_is_gone_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    await q.get()
    q.done("a")
    assert len(q) == 0
    assert not q.is_processing("a")


async def test_get_waits_for_an_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    got: list[str] = []

    async def worker() -> None:
        item = await q.get()
        assert item is not SHUTDOWN
        got.append(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        await anyio.sleep(5)
        assert got == []
        q.add("x")
    assert got == ["x"]


async def test_two_workers_never_hold_the_same_item() -> None:
    q: WorkQueue[str] = WorkQueue()
    holding: set[str] = set()
    runs: dict[str, int] = {}

    async def worker() -> None:
        while (item := await q.get()) is not SHUTDOWN:
            assert item not in holding, f"{item} taken by two workers"
            holding.add(item)
            await anyio.sleep(1)
            # Re-added while held: must run again, after this run.
            if runs.setdefault(item, 0) == 0:
                q.add(item)
            runs[item] += 1
            holding.discard(item)
            q.done(item)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(worker)
        for key in ("a", "b", "a", "c", "b"):
            q.add(key)
        await anyio.sleep(10)
        q.shut_down()
    assert runs == {"a": 2, "b": 2, "c": 2}


async def test_shutdown_hands_out_queued_items_then_the_sentinel() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.shut_down()
    q.add("b")  # refused
    assert await q.get() == "a"
    assert await q.get() is SHUTDOWN
    assert await q.get() is SHUTDOWN


async def test_shutdown_wakes_a_waiting_get() -> None:
    q: WorkQueue[str] = WorkQueue()
    results: list[object] = []

    async def worker() -> None:
        results.append(await q.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        await anyio.sleep(1)
        q.shut_down()
    assert results == [SHUTDOWN]


async def test_shut_down_with_drain_waits_for_in_flight_work() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = await q.get()
    assert item == "a"
    drained = anyio.Event()

    async def drain() -> None:
        await q.shut_down_with_drain()
        drained.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        await anyio.sleep(30)
        assert not drained.is_set()
        q.done(item)
    assert drained.is_set()
