"""The reflector on scripted list and watch answers, in virtual time."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from runtime.cache import Bookmark, Delta, Listed, Resource, Selection, Watched, reflect
from runtime.cache.reflector import SILENCE_MARGIN_SECONDS, WATCH_SECONDS_MAX, WATCH_SECONDS_MIN
from runtime.clock import LoopClock
from runtime.errors import ApiError
from tests.unit.runtime.scripted_api import (
    HANG,
    ScriptedApi,
    bookmark,
    error_event,
    event,
    gone,
    obj,
    page,
)

pytestmark = pytest.mark.looptime

JOBS = Resource("batch", "v1", "jobs")


class RecordingClock(LoopClock):
    """The loop's (virtual) clock, remembering every pause asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await super().sleep(seconds)


async def take(
    api: ScriptedApi,
    count: int,
    *,
    clock: LoopClock | None = None,
    selection: Selection = Selection(),  # noqa: B008
    watch_list: bool = False,
) -> list[Delta]:
    deltas: list[Delta] = []
    stream = reflect(
        api, JOBS, clock=clock or LoopClock(), selection=selection, watch_list=watch_list
    )
    try:
        async with asyncio.timeout(50_000):
            async for delta in stream:
                deltas.append(delta)
                if len(deltas) == count:
                    break
    finally:
        await stream.aclose()
    return deltas


def versions(deltas: list[Delta]) -> list[str]:
    return [delta.resource_version for delta in deltas]


async def test_lists_consistently_page_by_page_then_watches_from_the_lists_version() -> None:
    api = ScriptedApi(
        lists=[page([obj("a", 5)], rv=10)],
        watches=[[event("ADDED", obj("b", 11)), event("MODIFIED", obj("a", 12))]],
    )
    listed, added, modified = await take(api, 3, selection=Selection(label_selector="x=y"))
    assert isinstance(listed, Listed)
    assert listed.resource_version == "10"
    assert [o["metadata"]["name"] for o in listed.objects] == ["a"]
    assert listed.objects[0]["kind"] == "Job"
    assert isinstance(added, Watched)
    assert isinstance(modified, Watched)
    assert (added.type, modified.type) == ("ADDED", "MODIFIED")
    # resourceVersion unset: a consistent read, which honours the limit ("0" would not).
    assert api.params_of("list") == [{"labelSelector": "x=y", "limit": "500"}]
    [watch] = api.params_of("watch")
    assert watch["resourceVersion"] == "10"
    assert watch["allowWatchBookmarks"] == "true"
    assert watch["labelSelector"] == "x=y"
    assert WATCH_SECONDS_MIN <= int(watch["timeoutSeconds"]) <= WATCH_SECONDS_MAX


async def test_watch_timeouts_are_randomised() -> None:
    api = ScriptedApi(lists=[page([], rv=1)], watches=[[bookmark(n)] for n in range(2, 30)])
    await take(api, 29)
    seconds = {int(params["timeoutSeconds"]) for params in api.params_of("watch")}
    assert len(seconds) > 10


async def test_a_bookmark_advances_the_version_the_next_watch_starts_from() -> None:
    api = ScriptedApi(
        lists=[page([], rv=10)],
        watches=[[event("ADDED", obj("a", 11)), bookmark(15)], [event("ADDED", obj("b", 16))]],
    )
    deltas = await take(api, 4)
    assert isinstance(deltas[2], Bookmark)
    assert versions(deltas) == ["10", "11", "15", "16"]
    assert [p["resourceVersion"] for p in api.params_of("watch")] == ["10", "15"]
    assert len(api.params_of("list")) == 1


async def test_server_ending_the_watch_rewatches_at_once_from_the_last_version() -> None:
    api = ScriptedApi(
        lists=[page([], rv=10)],
        watches=[[5.0, event("ADDED", obj("a", 11))], [event("ADDED", obj("b", 12))]],
    )
    await take(api, 3)
    first, second = api.times_of("watch")
    assert second - first == pytest.approx(5.0)
    assert [p["resourceVersion"] for p in api.params_of("watch")] == ["10", "11"]


@pytest.mark.parametrize(
    "failure",
    [
        error_event(410, "Expired"),
        error_event(410, "Gone"),
    ],
)
async def test_410_as_an_error_event_relists_most_recent_state(failure: bytes) -> None:
    api = ScriptedApi(
        lists=[page([obj("a", 5), obj("b", 6)], rv=10), page([obj("a", 20)], rv=21)],
        watches=[[event("MODIFIED", obj("a", 11)), failure], [event("ADDED", obj("c", 22))]],
    )
    deltas = await take(api, 4)
    relisted = deltas[2]
    assert isinstance(relisted, Listed)
    assert [o["metadata"]["name"] for o in relisted.objects] == ["a"]
    assert api.params_of("list")[1] == {"limit": "500"}  # no resourceVersion: a consistent read
    assert [p["resourceVersion"] for p in api.params_of("watch")] == ["10", "21"]


async def test_410_on_opening_the_watch_relists_without_pause() -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[page([], rv=10), page([], rv=30)],
        watches=[gone(), [event("ADDED", obj("a", 31))]],
    )
    deltas = await take(api, 3, clock=clock)
    assert versions(deltas) == ["10", "30", "31"]
    assert clock.sleeps == []


async def test_connection_error_rewatches_from_the_last_version_without_relisting() -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[page([obj("a", 5)], rv=10)],
        watches=[
            [event("ADDED", obj("b", 11)), ConnectionResetError("reset by peer")],
            [event("ADDED", obj("c", 12))],
        ],
    )
    deltas = await take(api, 3, clock=clock)
    assert versions(deltas) == ["10", "11", "12"]
    assert len(api.params_of("list")) == 1
    assert [p["resourceVersion"] for p in api.params_of("watch")] == ["10", "11"]
    [pause] = clock.sleeps
    assert 0.8 <= pause <= 0.8 * 1.2
    first, second = api.times_of("watch")
    assert second - first == pytest.approx(pause, abs=1e-3)  # looptime resolution


@pytest.mark.parametrize("status", [429, 500, 503, 504])
async def test_throttling_and_server_errors_rewatch_without_relisting(status: int) -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[page([], rv=10)],
        watches=[ApiError(status, "x", "y"), [event("ADDED", obj("a", 11))]],
    )
    await take(api, 2, clock=clock)
    assert len(api.params_of("list")) == 1
    assert [p["resourceVersion"] for p in api.params_of("watch")] == ["10", "10"]
    assert len(clock.sleeps) == 1


async def test_backoff_grows_from_0_8_to_30_seconds_and_resets_after_an_event() -> None:
    clock = RecordingClock()
    refusals: list[ConnectionRefusedError] = [ConnectionRefusedError() for _ in range(9)]
    api = ScriptedApi(
        lists=[page([], rv=10)],
        watches=[*refusals, [event("ADDED", obj("a", 11)), OSError(104, "reset")], [bookmark(12)]],
    )
    await take(api, 3, clock=clock)
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
    assert len(clock.sleeps) == 10
    for pause, base in zip(clock.sleeps, bases, strict=False):
        assert base <= pause <= min(base * 1.2, 30.0)
    # The event on the tenth connection proved the server healthy again.
    assert 0.8 <= clock.sleeps[-1] <= 0.96


async def test_retry_after_from_a_429_error_event_is_honoured() -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[page([], rv=10)],
        watches=[[error_event(429, "TooManyRequests", retryAfterSeconds=7)], [bookmark(11)]],
    )
    await take(api, 2, clock=clock)
    assert clock.sleeps == [7.0]
    assert len(api.params_of("list")) == 1


async def test_other_error_events_pause_then_relist() -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[page([obj("a", 5)], rv=10), page([], rv=40)],
        watches=[[error_event(403, "Forbidden")], [bookmark(41)]],
    )
    deltas = await take(api, 3, clock=clock)
    assert versions(deltas) == ["10", "40", "41"]
    assert len(clock.sleeps) == 1


async def test_a_silent_stream_is_abandoned_after_its_timeout_plus_a_margin() -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[page([], rv=10)],
        watches=[[event("ADDED", obj("a", 11)), HANG], [event("ADDED", obj("b", 12))]],
    )
    await take(api, 3, clock=clock)
    first, second = api.times_of("watch")
    promised = int(api.params_of("watch")[0]["timeoutSeconds"])
    assert second - first == pytest.approx(promised + SILENCE_MARGIN_SECONDS)
    assert api.params_of("watch")[1]["resourceVersion"] == "11"
    assert clock.sleeps == []


async def test_a_stream_that_keeps_sending_is_not_abandoned() -> None:
    api = ScriptedApi(
        lists=[page([], rv=10)],
        watches=[[x for n in range(11, 31) for x in (60.0, bookmark(n))]],
    )
    deltas = await take(api, 21)
    assert versions(deltas)[-1] == "30"
    assert len(api.params_of("watch")) == 1  # 20 minutes on one connection


async def test_a_watch_ended_at_once_with_nothing_sent_is_a_failure() -> None:
    clock = RecordingClock()
    api = ScriptedApi(lists=[page([], rv=10)], watches=[[], [], [bookmark(11)]])
    await take(api, 2, clock=clock)
    assert len(clock.sleeps) == 2
    assert clock.sleeps[1] > clock.sleeps[0]


async def test_a_failed_first_list_is_retried_after_a_pause() -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[ApiError(503, "ServiceUnavailable", "starting"), page([obj("a", 5)], rv=10)]
    )
    [listed] = await take(api, 1, clock=clock)
    assert isinstance(listed, Listed)
    assert len(clock.sleeps) == 1


async def test_a_bug_is_not_retried() -> None:
    api = ScriptedApi(lists=[page([], rv=10)], watches=[[b"not json"]])
    with pytest.raises(orjson.JSONDecodeError):
        await take(api, 2)


async def test_a_server_error_repeating_for_one_version_relists() -> None:
    clock = RecordingClock()
    api = ScriptedApi(
        lists=[page([], rv=10), page([], rv=50)],
        watches=[*([error_event(500, "InternalError")] for _ in range(3)), [bookmark(51)]],
    )
    deltas = await take(api, 3, clock=clock)
    assert versions(deltas) == ["10", "50", "51"]
    assert [p["resourceVersion"] for p in api.params_of("watch")] == ["10", "10", "10", "50"]
    assert len(clock.sleeps) == 3


async def test_a_list_that_keeps_meeting_410_is_retried_after_a_pause() -> None:
    clock = RecordingClock()
    expiring = [x for _ in range(4) for x in (page([], rv=1, token="t"), gone())]
    api = ScriptedApi(lists=[*expiring, page([obj("a", 5)], rv=10)])
    [listed] = await take(api, 1, clock=clock)
    assert isinstance(listed, Listed)
    assert listed.resource_version == "10"
    assert len(clock.sleeps) == 1
