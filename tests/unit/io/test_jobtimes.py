"""Job times moved onto a scaled controller clock (`--time-scale`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.timefmt import format_time, parse_time
from controller.io.jobtimes import on_clock
from runtime.clock import LoopClock
from runtime.jsonobj import Json

ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)


def scaled(k: float) -> Callable[[datetime], datetime]:
    return lambda wall: ORIGIN + (wall - ORIGIN) * k


def job(created: str, started: str, finished: str) -> Json:
    return {
        "metadata": {"name": "j", "creationTimestamp": created},
        "status": {
            "startTime": started,
            "completionTime": finished,
            "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": finished},
                {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": None},
            ],
        },
    }


def test_every_job_time_moves_from_the_end_of_its_second_and_nothing_else() -> None:
    original = job("2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:05Z")
    moved = on_clock(original, scaled(60))
    assert moved["metadata"]["creationTimestamp"] == "2026-01-01T00:02:00Z"
    assert moved["status"]["startTime"] == "2026-01-01T00:03:00Z"
    assert moved["status"]["completionTime"] == "2026-01-01T00:06:00Z"
    assert moved["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:06:00Z"
    assert moved["status"]["conditions"][1]["lastProbeTime"] is None
    assert original["status"]["startTime"] == "2026-01-01T00:00:02Z"  # a copy was moved


def test_an_unreadable_time_is_left_for_the_core_to_report() -> None:
    moved = on_clock(job("yesterday", "", "2026-01-01T00:00:05Z"), scaled(2))
    assert moved["metadata"]["creationTimestamp"] == "yesterday"
    assert moved["status"]["startTime"] == ""


@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=10**4),
    st.sampled_from([1, 2, 30, 60]),
)
def test_spans_between_job_times_grow_by_the_scale(start: int, span: int, k: int) -> None:
    t0 = ORIGIN + timedelta(seconds=start)
    t1 = t0 + timedelta(seconds=span)
    moved = on_clock(job(format_time(t0), format_time(t0), format_time(t1)), scaled(k))
    status = moved["status"]
    gap = parse_time(status["completionTime"]) - parse_time(status["startTime"])
    assert gap == timedelta(seconds=span * k)


async def test_the_loop_clock_moves_a_wall_time_by_its_scale_from_its_origin() -> None:
    real, fast = LoopClock(), LoopClock(30)
    wall = datetime.now(UTC)
    # Close to its own reading now (the clock started a moment ago) ...
    assert abs(fast.from_wall(wall) - fast.now()) < timedelta(seconds=30)
    # ... and every wall-clock second counts 30, before the origin as after it.
    later = fast.from_wall(wall + timedelta(seconds=2)) - fast.from_wall(wall)
    earlier = fast.from_wall(wall) - fast.from_wall(wall - timedelta(seconds=1))
    assert (later, earlier) == (timedelta(seconds=60), timedelta(seconds=30))
    assert real.from_wall(datetime(2030, 5, 6, tzinfo=UTC)) == datetime(2030, 5, 6, tzinfo=UTC)


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=999_999))
def test_a_moved_time_is_never_before_the_moment_it_stands_for(second: int, micro: int) -> None:
    # The Job finished at `moment`; its stamp lost the fraction of a second.
    moment = ORIGIN + timedelta(seconds=second, microseconds=micro)
    to_clock = scaled(60)
    finished = job(format_time(moment), format_time(moment), format_time(moment))
    moved = parse_time(on_clock(finished, to_clock)["status"]["completionTime"])
    assert moved >= to_clock(moment)
    assert moved - to_clock(moment) <= timedelta(seconds=60)
