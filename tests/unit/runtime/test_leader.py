"""Leader election: the pure takeover decision, and the elector against an
in-memory Lease API in virtual time."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import orjson
import pytest

from runtime.clock import LoopClock
from runtime.errors import ApiError
from runtime.leader import LeaderLost, LeaderTimings, frees_lease, leader_election
from runtime.lease import Create, Update, Wait, micro_time, next_action, released

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _lease(
    holder: str | None, renewed_ago: float, duration: int = 15, transitions: int = 3
) -> dict[str, Any]:
    renewed = NOW - timedelta(seconds=renewed_ago)
    return {
        "metadata": {"name": "l", "namespace": "ns", "resourceVersion": "42"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": micro_time(renewed - timedelta(seconds=100)),
            "renewTime": micro_time(renewed),
            "leaseTransitions": transitions,
        },
    }


def test_no_lease_creates_it() -> None:
    action = next_action(None, "me", NOW, lease_duration=15)
    assert action == Create(
        {
            "holderIdentity": "me",
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-03-01T12:00:00.000000Z",
            "renewTime": "2026-03-01T12:00:00.000000Z",
            "leaseTransitions": 0,
        }
    )


@pytest.mark.parametrize(
    ("lease", "expected"),
    [
        # Another holder, renewed 14.9 s ago of 15 s: still valid.
        (_lease("other", 14.9), ("wait", "other", 0.1)),
        # Another holder, renewed exactly 15 s ago: expired, take it.
        (_lease("other", 15), ("take", 4)),
        (_lease("other", 600), ("take", 4)),
        # The holder's own duration counts, not ours.
        (_lease("other", 20, duration=30), ("wait", "other", 10)),
        # Released (holder cleared), even if just now: take it at once.
        (_lease(None, 0, duration=1), ("take", 4)),
        (_lease("", 0), ("take", 4)),
        # Ours: renew, even if we were slow and it expired.
        (_lease("me", 3), ("renew", 3)),
        (_lease("me", 60), ("renew", 3)),
    ],
)
def test_takeover_decision_table(lease: dict[str, Any], expected: tuple[Any, ...]) -> None:
    action = next_action(lease, "me", NOW, lease_duration=15)
    match action:
        case Wait(holder, until):
            assert expected == ("wait", holder, (until - NOW).total_seconds())
        case Update(spec, acquired):
            assert expected == ("take" if acquired else "renew", spec["leaseTransitions"])
            assert spec["holderIdentity"] == "me"
            assert spec["renewTime"] == micro_time(NOW)
            assert spec["leaseDurationSeconds"] == 15
            old_acquire = lease["spec"]["acquireTime"]
            assert spec["acquireTime"] == (micro_time(NOW) if acquired else old_acquire)
        case _:
            pytest.fail(f"unexpected {action}")


def test_a_lease_with_a_holder_but_no_times_can_be_taken() -> None:
    lease = {"metadata": {}, "spec": {"holderIdentity": "other"}}
    assert isinstance(next_action(lease, "me", NOW, lease_duration=15), Update)


def test_released_clears_the_holder_and_keeps_the_resource_version() -> None:
    body = released(_lease("me", 1), NOW)
    assert body["spec"]["holderIdentity"] is None
    assert body["spec"]["leaseDurationSeconds"] == 1
    assert body["spec"]["leaseTransitions"] == 3
    assert body["metadata"]["resourceVersion"] == "42"
    action = next_action(body, "other", NOW, lease_duration=15)
    assert isinstance(action, Update)
    assert action.acquired


def test_timings_must_leave_the_leader_time_to_give_up() -> None:
    LeaderTimings()
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderTimings(lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderTimings(renew_deadline=2, retry_period=2)


class FakeLeases:
    """Leases in memory with the API server's optimistic concurrency, and watches."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 0
        self.failing = False
        self.reads = 0
        self.writes: list[tuple[str, str | None]] = []
        self.written: list[tuple[float, dict[str, Any]]] = []  # (loop time, spec) per write
        self.history: list[dict[str, Any]] = []  # every object written, in order
        self._changed = anyio.Event()  # set and replaced on every write

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        timeout: float = 30.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        await anyio.sleep(0.01)
        if self.failing:
            raise ApiError(503, "ServiceUnavailable", "scripted")
        if method == "GET":
            self.reads += 1
            if path not in self.objects:
                raise ApiError(404, "NotFound", path)
            return copy.deepcopy(self.objects[path])
        assert isinstance(body, dict)
        obj = copy.deepcopy(body)
        if method == "POST":
            path = f"{path}/{obj['metadata']['name']}"
            if path in self.objects:
                raise ApiError(409, "AlreadyExists", path)
        elif method == "PUT":
            current = self.objects[path]["metadata"]["resourceVersion"]
            if obj["metadata"].get("resourceVersion") != current:
                raise ApiError(409, "Conflict", "the object has been modified")
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[path] = obj
        self.writes.append((method, obj["spec"].get("holderIdentity")))
        self.written.append((anyio.current_time(), copy.deepcopy(obj["spec"])))
        self.history.append(copy.deepcopy(obj))
        self._changed.set()
        self._changed = anyio.Event()
        return copy.deepcopy(obj)

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str]
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A watch of one Lease from a resourceVersion: MODIFIED events only."""
        if self.failing:
            raise ApiError(503, "ServiceUnavailable", "scripted")
        name = params["fieldSelector"].removeprefix("metadata.name=")
        since = int(params["resourceVersion"])

        async def lines() -> AsyncIterator[bytes]:
            sent = since
            while True:
                changed = self._changed
                for obj in self.history:
                    rv = int(obj["metadata"]["resourceVersion"])
                    if rv > sent and obj["metadata"]["name"] == name:
                        sent = rv
                        yield orjson.dumps({"type": "MODIFIED", "object": obj})
                await changed.wait()

        yield lines()

    def holder(self) -> str | None:
        (lease,) = self.objects.values()
        holder: str | None = lease["spec"].get("holderIdentity")
        return holder


class View:
    """One candidate's connection to the shared Leases; `partitioned` makes every
    request hang, as for a process that froze or lost the network."""

    def __init__(self, leases: FakeLeases) -> None:
        self.leases = leases
        self.partitioned = False

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        timeout: float = 30.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        if self.partitioned:
            await anyio.sleep_forever()
        return await self.leases.request(method, path, body=body, timeout=timeout)

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str]
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        if self.partitioned:
            await anyio.sleep_forever()
        async with self.leases.stream(path, params=params) as lines:
            yield lines


class Candidate:
    """Runs `leader_election` and records when its protected work started and stopped."""

    def __init__(self, leases: FakeLeases, identity: str) -> None:
        self.view = View(leases)
        self.identity = identity
        self.started: float | None = None
        self.stopped: float | None = None
        self.outcome: BaseException | None = None
        self.leading = anyio.Event()
        self.finish = anyio.Event()  # set to leave the block cleanly
        self.fail_with: Exception | None = None
        self.done = anyio.Event()

    async def run(self) -> None:
        try:
            async with leader_election(
                self.view, namespace="ns", name="l", clock=LoopClock(), identity=self.identity
            ):
                self.started = anyio.current_time()
                self.leading.set()
                try:
                    await self.finish.wait()
                    if self.fail_with is not None:
                        raise self.fail_with
                finally:
                    self.stopped = anyio.current_time()
        except Exception as exc:
            self.outcome = exc
        finally:
            self.done.set()


async def _wait_for(event: anyio.Event, limit: float = 120) -> None:
    with anyio.fail_after(limit):
        await event.wait()


@contextlib.asynccontextmanager
async def _leader_and_standby() -> AsyncIterator[tuple[FakeLeases, Candidate, Candidate]]:
    """`a` leading, then `b` started beside it; both cancelled (a shutdown) when the block
    ends."""
    leases = FakeLeases()
    a, b = Candidate(leases, "a"), Candidate(leases, "b")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        await _wait_for(a.leading)
        tg.start_soon(b.run)
        yield leases, a, b
        tg.cancel_scope.cancel()


@pytest.mark.looptime
async def test_leader_renews_while_a_standby_waits() -> None:
    async with _leader_and_standby() as (leases, a, b):
        await anyio.sleep(60)
        assert not b.leading.is_set()
        assert leases.holder() == "a"
        renewals = leases.writes.count(("PUT", "a"))
        assert 25 <= renewals <= 31  # every 2 s (plus request time) for 60 s
    # Cancelled from outside (a shutdown) is a clean exit too: the Lease is released.
    assert leases.holder() is None
    assert a.outcome is None


@pytest.mark.looptime
async def test_a_partitioned_leader_stops_before_the_standby_takes_over() -> None:
    async with _leader_and_standby() as (_leases, a, b):
        await anyio.sleep(7)
        a.view.partitioned = True
        last_renewal = anyio.current_time()  # within 2 s before this
        await _wait_for(b.leading)
    assert isinstance(a.outcome, LeaderLost)
    # One message with the whole story: which Lease, whose, and why.
    assert "lost by a: not renewed within the 10s renew deadline (last attempt:" in str(a.outcome)
    assert a.stopped is not None
    assert b.started is not None
    # `a` gives up once the renew deadline passes since its last renewal ...
    assert last_renewal - 2 + 10 <= a.stopped <= last_renewal + 10 + 0.5
    # ... and `b` takes over only once the 15 s lease has expired, after `a` stopped.
    assert last_renewal - 2 + 15 <= b.started <= last_renewal + 15 + 4.4 + 0.5
    assert a.stopped < b.started


@pytest.mark.looptime
async def test_a_clean_exit_releases_so_the_standby_takes_over_at_once() -> None:
    async with _leader_and_standby() as (leases, a, b):
        await anyio.sleep(30)
        first_after = len(leases.written)
        a.finish.set()
        await _wait_for(a.done)
        assert a.outcome is None
        await _wait_for(b.leading)
    # Read from the write log, not the live Lease: `b` may already have taken it.
    after = leases.written[first_after:]
    while after and after[0][1]["holderIdentity"] == "a":  # a renewal already in flight
        after = after[1:]
    holders = [spec["holderIdentity"] for _, spec in after]
    assert holders[:2] == [None, "b"], "a's release is the next write, then b's takeover"
    (released_at, released_spec), (taken_at, _) = after[:2]
    assert released_spec["leaseDurationSeconds"] == 1
    # The standby watches: it reads and takes the Lease (two 10 ms requests) on seeing the
    # release, instead of at its next retry (2 s to 4.4 s apart) or after the 15 s lease.
    assert b.started is not None
    assert taken_at - released_at <= 0.05
    assert b.started - released_at <= 0.05


@pytest.mark.looptime
async def test_the_standby_that_lost_the_race_for_a_release_still_wakes_on_the_next() -> None:
    leases = FakeLeases()
    a, b, c = Candidate(leases, "a"), Candidate(leases, "b"), Candidate(leases, "c")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        await _wait_for(a.leading)
        tg.start_soon(b.run)
        tg.start_soon(c.run)
        await anyio.sleep(10)
        a.finish.set()
        await _wait_for(a.done)
        first = anyio.Event()

        async def first_of(candidate: Candidate) -> None:
            await candidate.leading.wait()
            first.set()

        tg.start_soon(first_of, b)
        tg.start_soon(first_of, c)
        await _wait_for(first, limit=1)
        winner, loser = (b, c) if b.leading.is_set() else (c, b)
        assert ("PUT", winner.identity) in leases.writes
        winner.finish.set()
        await _wait_for(winner.done)
        released_at = anyio.current_time()
        await _wait_for(loser.leading)
        assert loser.started is not None
        assert loser.started - released_at <= 0.05
        tg.cancel_scope.cancel()


@pytest.mark.looptime
async def test_a_standby_polls_once_per_retry_period_however_often_the_leader_renews() -> None:
    """Renewals show up on the standby's watch too; only a release may wake it early."""
    async with _leader_and_standby() as (leases, _a, b):
        await anyio.sleep(1)
        reads_before = leases.reads
        await anyio.sleep(60)
        assert not b.leading.is_set()
        leader_reads = leases.writes.count(("PUT", "a"))  # one GET per renewal
        standby_reads = leases.reads - reads_before - leader_reads
        assert 60 / 4.4 - 1 <= standby_reads <= 60 / 2 + 1


@pytest.mark.looptime
async def test_a_standby_whose_watch_fails_still_takes_over_by_polling() -> None:
    async with _leader_and_standby() as (_leases, a, b):
        await anyio.sleep(5)

        @contextlib.asynccontextmanager
        async def broken(path: str, *, params: Mapping[str, str]) -> AsyncIterator[Any]:
            raise ApiError(500, "InternalError", "scripted")
            yield  # pragma: no cover

        b.view.stream = broken  # type: ignore[method-assign]
        await anyio.sleep(5)  # `b` is now in a pause with no watch
        a.finish.set()
        await _wait_for(a.done)
        released_at = anyio.current_time()
        await _wait_for(b.leading)
        assert b.started is not None
        assert b.started - released_at <= 4.4 + 0.1


@pytest.mark.parametrize(
    ("event", "frees"),
    [
        ({"type": "MODIFIED", "object": {"spec": {"holderIdentity": "a"}}}, False),
        ({"type": "MODIFIED", "object": {"spec": {"holderIdentity": None}}}, True),
        ({"type": "MODIFIED", "object": {"spec": {"holderIdentity": ""}}}, True),
        ({"type": "MODIFIED", "object": {"spec": {}}}, True),
        ({"type": "ADDED", "object": {"spec": {"holderIdentity": "a"}}}, False),
        ({"type": "DELETED", "object": {"spec": {"holderIdentity": "a"}}}, True),
        # 410 Gone and the like: the watch is over and only a read can tell.
        ({"type": "ERROR", "object": {"kind": "Status", "code": 410}}, True),
    ],
)
def test_which_watch_events_may_free_the_lease(event: dict[str, Any], frees: bool) -> None:
    assert frees_lease(event) is frees


@pytest.mark.looptime
async def test_leader_that_sees_another_holder_stops_at_the_next_round() -> None:
    leases = FakeLeases()
    a = Candidate(leases, "a")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        await _wait_for(a.leading)
        await anyio.sleep(5)
        (path,) = leases.objects
        stolen = copy.deepcopy(leases.objects[path])
        stolen["spec"].update(holderIdentity="intruder", renewTime=micro_time(datetime.now(UTC)))
        leases.objects[path] = stolen
        taken_at = anyio.current_time()
        await _wait_for(a.done, limit=30)
    assert isinstance(a.outcome, LeaderLost)
    assert str(a.outcome).endswith("lost by a: taken by intruder")
    assert a.stopped is not None
    assert a.stopped - taken_at <= 2.5
    assert leases.holder() == "intruder", "a lost leader must not release another's Lease"


@pytest.mark.looptime
async def test_an_error_in_the_block_propagates_unwrapped_and_releases() -> None:
    leases = FakeLeases()
    a = Candidate(leases, "a")
    a.fail_with = RuntimeError("boom")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        await _wait_for(a.leading)
        a.finish.set()
    assert type(a.outcome) is RuntimeError
    assert leases.holder() is None


@pytest.mark.looptime
async def test_candidates_racing_for_a_new_lease_elect_exactly_one() -> None:
    leases = FakeLeases()
    candidates = [Candidate(leases, f"c{i}") for i in range(3)]
    async with anyio.create_task_group() as tg:
        for c in candidates:
            tg.start_soon(c.run)
        await anyio.sleep(40)
        assert sum(c.leading.is_set() for c in candidates) == 1
        tg.cancel_scope.cancel()


@pytest.mark.looptime
async def test_on_leading_reports_both_edges() -> None:
    leases, seen = FakeLeases(), list[bool]()
    async with leader_election(
        leases, namespace="ns", name="l", clock=LoopClock(), on_leading=seen.append
    ) as leadership:
        assert seen == [True]
        assert leases.holder() == leadership.identity
    assert seen == [True, False]
