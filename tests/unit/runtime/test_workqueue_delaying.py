"""add_after and add_rate_limited in virtual time."""

from __future__ import annotations

import anyio
import pytest

from runtime.clock import LoopClock, SteppedClock
from runtime.workqueue import (
    SHUTDOWN,
    DelayingQueue,
    ItemExponential,
    RateLimitingQueue,
    Shutdown,
)

pytestmark = pytest.mark.looptime


async def _get_at(q: DelayingQueue[str], clock: LoopClock) -> tuple[str | Shutdown, float]:
    item = await q.get()
    return item, clock.monotonic()


async def test_add_after_delivers_at_the_time() -> None:
    clock = LoopClock()
    async with DelayingQueue[str](clock=clock) as q:
        start = clock.monotonic()
        q.add_after("a", 5)
        item, at = await _get_at(q, clock)
    assert item == "a"
    assert at - start == pytest.approx(5)


async def test_items_come_out_in_ready_order_not_add_order() -> None:
    clock = LoopClock()
    async with DelayingQueue[str](clock=clock) as q:
        start = clock.monotonic()
        q.add_after("late", 30)
        q.add_after("early", 10)
        q.add_after("middle", 20)
        got = [await _get_at(q, clock) for _ in range(3)]
    assert [(item, round(at - start)) for item, at in got] == [
        ("early", 10),
        ("middle", 20),
        ("late", 30),
    ]


@pytest.mark.parametrize(
    ("name", "first", "second", "why"),
    [
        ("a", 10, 60, "the ignored later time must not deliver it again"),
        ("b", 60, 10, "the superseded later entry must not deliver it again"),
    ],
    ids=["a-later-second-add-is-ignored", "an-earlier-second-add-wins"],
)
async def test_adding_twice_keeps_the_earlier_time(
    name: str, first: float, second: float, why: str
) -> None:
    clock = LoopClock()
    async with DelayingQueue[str](clock=clock) as q:
        start = clock.monotonic()
        q.add_after(name, first)
        q.add_after(name, second)
        item, at = await _get_at(q, clock)
        assert (item, round(at - start)) == (name, 10)
        q.done(name)
        await anyio.sleep(100)
        assert len(q) == 0, why


async def test_non_positive_delay_adds_at_once() -> None:
    clock = LoopClock()
    async with DelayingQueue[str](clock=clock) as q:
        q.add_after("a", 0)
        q.add_after("b", -1)
        assert len(q) == 2


async def test_delayed_item_already_queued_is_not_duplicated() -> None:
    clock = LoopClock()
    async with DelayingQueue[str](clock=clock) as q:
        q.add("a")
        q.add_after("a", 1)
        await anyio.sleep(2)
        assert len(q) == 1


async def test_leaving_the_block_shuts_down_and_drops_waiting_items() -> None:
    clock = LoopClock()
    async with DelayingQueue[str](clock=clock) as q:
        q.add_after("a", 10)
    assert q.shutting_down
    assert await q.get() is SHUTDOWN


async def test_time_scale_compresses_delays() -> None:
    clock = LoopClock(scale=10)
    loop_start = anyio.current_time()
    async with DelayingQueue[str](clock=clock) as q:
        q.add_after("a", 100)  # 100 s of controller time = 10 s of loop time
        assert await q.get() == "a"
    assert anyio.current_time() - loop_start == pytest.approx(10)


async def test_add_rate_limited_backs_off_and_forget_resets() -> None:
    clock = LoopClock()
    limiter = ItemExponential(base=1, cap=8)
    async with RateLimitingQueue[str](clock=clock, rate_limiter=limiter) as q:
        delays = []
        for _ in range(5):
            delays.append(q.add_rate_limited("a"))
            start = clock.monotonic()
            item, at = await _get_at(q, clock)
            assert item == "a"
            assert at - start == pytest.approx(delays[-1])
            q.done("a")
        assert delays == [1, 2, 4, 8, 8]
        assert q.num_requeues("a") == 5
        q.forget("a")
        assert q.num_requeues("a") == 0
        assert q.add_rate_limited("a") == 1


async def test_add_rate_limited_honours_a_minimum() -> None:
    clock = LoopClock()
    async with RateLimitingQueue[str](clock=clock) as q:
        assert q.add_rate_limited("a", at_least=7) == 7
        start = clock.monotonic()
        _, at = await _get_at(q, clock)
    assert at - start == pytest.approx(7)


async def test_retries_wait_on_the_retry_clock_and_requeues_on_the_clock() -> None:
    real, stepped = LoopClock(), SteppedClock()
    limiter = ItemExponential(base=1, cap=8)
    async with RateLimitingQueue[str](clock=stepped, rate_limiter=limiter, retry_clock=real) as q:
        q.add_after("requeued", 5)
        start = real.monotonic()
        assert [q.add_rate_limited("retried") for _ in range(2)] == [1, 2]
        # Both retries come (the queue coalesces them while queued); the requeue does
        # not, however long the retry clock runs.
        got = [await _get_at(q, real)]
        q.done("retried")
        got.append(await _get_at(q, real))
        assert [item for item, _ in got] == ["retried", "retried"]
        assert [at - start for _, at in got] == pytest.approx([1, 2])
        q.done("retried")
        with anyio.move_on_after(3600):
            await q.get()
            pytest.fail("the requeue came before its clock moved")
        await stepped.advance(5)
        assert await q.get() == "requeued"
    assert stepped.monotonic() == 5


async def test_add_after_outside_the_block_is_refused_not_lost() -> None:
    q = DelayingQueue[str](clock=LoopClock())
    with pytest.raises(RuntimeError, match="async with"):
        q.add_after("a", 1)
