"""The controller loop: outcomes mapped to queue actions, in virtual time."""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest
from prometheus_client import CollectorRegistry

from runtime.clock import LoopClock
from runtime.errors import ApiError
from runtime.loop import (
    DONE,
    Controller,
    Done,
    ErrorReporter,
    RateLimited,
    RequeueAfter,
    Result,
    Transient,
    Unrecognized,
    outcome_of,
    requeue_after,
)
from runtime.metrics import RuntimeMetrics
from runtime.workqueue import RateLimitingQueue


def _api(status: int, retry_after: float | None = None) -> ApiError:
    return ApiError(status, "", "scripted", retry_after=retry_after)


@pytest.mark.parametrize(
    ("error", "at_least"),
    [
        (_api(409), 0.0),
        (_api(429), 0.0),
        (_api(429, retry_after=7), 7.0),
        (_api(500), 0.0),
        (_api(503, retry_after=2), 2.0),
        (TimeoutError(), 0.0),
        (ConnectionResetError(), 0.0),
        (ConnectionRefusedError(), 0.0),
    ],
)
def test_transient_errors_are_retried_through_the_rate_limiter(
    error: Exception, at_least: float
) -> None:
    assert outcome_of(error) == Transient(error, at_least)


@pytest.mark.parametrize(
    "error",
    [_api(400), _api(403), _api(404), _api(422), ValueError("bug"), KeyError("spec")],
)
def test_other_errors_are_unrecognized(error: Exception) -> None:
    assert outcome_of(error) == Unrecognized(error)


def test_results_map_to_their_outcomes() -> None:
    assert outcome_of(DONE) == Done()
    assert outcome_of(requeue_after(30)) == RequeueAfter(30)
    assert outcome_of(Result(requeue=True)) == RateLimited()


@dataclass
class Scripted:
    """Answers each reconcile of a key with the next scripted response, then DONE."""

    script: dict[str, list[Result | Exception]]
    clock: LoopClock
    duration: float = 0.0
    calls: list[tuple[str, float]] = field(default_factory=list)
    active: set[str] = field(default_factory=set)
    overlaps: int = 0
    max_active: int = 0

    async def reconcile(self, key: str) -> Result:
        if key in self.active:
            self.overlaps += 1
        self.active.add(key)
        self.max_active = max(self.max_active, len(self.active))
        self.calls.append((key, self.clock.monotonic()))
        try:
            await anyio.sleep(self.duration)
            responses = self.script.get(key, [])
            response = responses.pop(0) if responses else DONE
            if isinstance(response, Exception):
                raise response
            return response
        finally:
            self.active.discard(key)

    def gaps(self, key: str) -> list[float]:
        times = [at for k, at in self.calls if k == key]
        return [round(b - a, 6) for a, b in itertools.pairwise(times)]


@dataclass
class Reports:
    got: list[tuple[str, Exception]] = field(default_factory=list)

    async def unrecognized_error(self, key: str, error: Exception) -> None:
        self.got.append((key, error))


@dataclass
class Harness:
    queue: RateLimitingQueue[str]
    registry: CollectorRegistry

    def sample(self, metric: str, /, **labels: str) -> float:
        value = self.registry.get_sample_value(metric, labels)
        return 0.0 if value is None else value


@asynccontextmanager
async def running(
    reconciler: Scripted, *, workers: int = 1, reporter: ErrorReporter | None = None
) -> AsyncIterator[Harness]:
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(registry)
    clock = reconciler.clock
    async with RateLimitingQueue[str](clock=clock, observer=metrics.queue("t", clock)) as queue:
        controller = Controller(
            "t",
            reconciler,
            queue,
            clock=clock,
            workers=workers,
            observer=metrics.reconcile("t"),
            reporter=reporter,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(controller.run)
            yield Harness(queue, registry)
            tg.cancel_scope.cancel()


def _script(**responses: Sequence[Result | Exception]) -> dict[str, list[Result | Exception]]:
    return {key: list(seq) for key, seq in responses.items()}


@pytest.mark.looptime
async def test_transient_errors_back_off_exponentially_then_success_forgets() -> None:
    rec = Scripted(_script(a=[_api(500), _api(409), TimeoutError()]), LoopClock())
    async with running(rec) as h:
        h.queue.add("a")
        await anyio.sleep(10)
        assert rec.gaps("a") == [0.005, 0.01, 0.02]
        assert h.queue.num_requeues("a") == 0
        assert h.sample("controller_runtime_reconcile_total", controller="t", result="error") == 3
        assert h.sample("controller_runtime_reconcile_total", controller="t", result="success") == 1
        assert h.sample("controller_runtime_reconcile_errors_total", controller="t") == 3
        assert h.sample("workqueue_retries_total", name="t") == 3
        assert h.sample("workqueue_adds_total", name="t") == 4
        assert h.sample("workqueue_depth", name="t") == 0


@pytest.mark.looptime
async def test_retry_after_is_a_minimum_delay() -> None:
    rec = Scripted(_script(a=[_api(429, retry_after=3), _api(429)]), LoopClock())
    async with running(rec) as h:
        h.queue.add("a")
        await anyio.sleep(10)
    # Retry-After 3 s beats the limiter's 5 ms; without one the limiter's 10 ms applies.
    assert rec.gaps("a") == [3.0, 0.01]


@pytest.mark.looptime
async def test_unrecognized_error_waits_the_cap_and_is_reported_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    boom = ValueError("spec.template is not a mapping")
    rec = Scripted(_script(**{"ns/a": [boom]}), LoopClock())
    reports = Reports()
    with caplog.at_level(logging.ERROR, logger="runtime.loop"):
        async with running(rec, reporter=reports) as h:
            h.queue.add("ns/a")
            await anyio.sleep(999)
            assert len(rec.calls) == 1, "an unrecognised error must not hot-loop"
            await anyio.sleep(2)
            assert rec.gaps("ns/a") == [1000.0]
            assert reports.got == [("ns/a", boom)]
            assert (
                h.sample("controller_runtime_reconcile_unrecognized_errors_total", controller="t")
                == 1
            )
            assert h.sample("controller_runtime_reconcile_errors_total", controller="t") == 1
    assert any("ns/a" in r.getMessage() and r.exc_info for r in caplog.records)


@pytest.mark.looptime
async def test_a_failing_reporter_does_not_stop_the_worker() -> None:
    class Broken:
        async def unrecognized_error(self, key: str, error: Exception) -> None:
            raise _api(500)

    rec = Scripted(_script(a=[KeyError("x")]), LoopClock())
    async with running(rec, reporter=Broken()) as h:
        h.queue.add("a")
        h.queue.add("b")
        await anyio.sleep(1)
    assert [k for k, _ in rec.calls] == ["a", "b"]


@pytest.mark.looptime
async def test_requeue_after_forgets_failures_and_comes_back_on_time() -> None:
    rec = Scripted(_script(a=[_api(500), _api(500), requeue_after(30), _api(500)]), LoopClock())
    async with running(rec) as h:
        h.queue.add("a")
        await anyio.sleep(100)
        # The failure after the requeue starts again from 5 ms.
        assert rec.gaps("a") == [0.005, 0.01, 30.0, 0.005]
        assert (
            h.sample("controller_runtime_reconcile_total", controller="t", result="requeue_after")
            == 1
        )


@pytest.mark.looptime
async def test_requeue_goes_through_the_rate_limiter_without_an_error() -> None:
    rec = Scripted(_script(a=[Result(requeue=True), Result(requeue=True)]), LoopClock())
    async with running(rec) as h:
        h.queue.add("a")
        await anyio.sleep(1)
        assert rec.gaps("a") == [0.005, 0.01]
        assert h.sample("controller_runtime_reconcile_total", controller="t", result="requeue") == 2
        assert h.sample("controller_runtime_reconcile_errors_total", controller="t") == 0


@pytest.mark.looptime
async def test_one_key_never_reconciles_concurrently_but_distinct_keys_do() -> None:
    rec = Scripted({}, LoopClock(), duration=1.0)
    async with running(rec, workers=4) as h:
        for key in ("a", "b", "c", "d"):
            h.queue.add(key)
        for _ in range(20):
            await anyio.sleep(0.25)
            h.queue.add("a")
        await anyio.sleep(5)
    assert rec.overlaps == 0
    assert rec.max_active == 4
    # Re-adds during a run coalesce into one more run after it.
    assert 4 <= len([k for k, _ in rec.calls if k == "a"]) <= 7
    assert all(gap >= 1.0 for gap in rec.gaps("a"))


@pytest.mark.looptime
async def test_run_returns_once_the_queue_is_shut_down() -> None:
    clock = LoopClock()
    rec = Scripted({}, clock, duration=2.0)
    async with RateLimitingQueue[str](clock=clock) as queue:
        controller = Controller("t", rec, queue, clock=clock, workers=2)
        queue.add("a")
        queue.add("b")
        queue.add("c")
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(controller.run)
                await anyio.sleep(1)
                await queue.shut_down_with_drain()
                assert clock.monotonic() == pytest.approx(4.0)
    assert sorted(k for k, _ in rec.calls) == ["a", "b", "c"]


@pytest.mark.looptime
async def test_stop_finishes_the_reconciles_in_flight_and_takes_no_more_keys() -> None:
    clock = LoopClock()
    rec = Scripted({}, clock, duration=2.0)
    async with RateLimitingQueue[str](clock=clock) as queue:
        controller = Controller("t", rec, queue, clock=clock, workers=2)
        for key in "abcde":
            queue.add(key)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(controller.run)
                await anyio.sleep(1)  # `a` and `b` are in flight
                controller.stop()
                queue.add("f")  # refused: the queue is shut down
        # `run` returned when the two reconciles in flight finished, not after the queue.
        assert clock.monotonic() == pytest.approx(2.0)
        assert len(queue) == 3
    assert sorted(k for k, _ in rec.calls) == ["a", "b"]
    assert rec.active == set(), "both reconciles ran to their end"


@pytest.mark.looptime
async def test_stop_before_run_starts_no_reconcile() -> None:
    clock = LoopClock()
    rec = Scripted({}, clock)
    async with RateLimitingQueue[str](clock=clock) as queue:
        controller = Controller("t", rec, queue, clock=clock, workers=2)
        queue.add("a")
        controller.stop()
        with anyio.fail_after(1):
            await controller.run()
    assert rec.calls == []
