"""The faults, in three lanes that run side by side, and the API server restarts.

- leader: one fault at a time at the leader, then wait for it to be replaced (kill -9
  right after a Job create, a Lease take, a status write, a Job finish or an Event; kill
  -9 at a random moment; SIGTERM; SIGSTOP/SIGCONT; a partition of its proxy).
- standby and network: connection resets on either proxy, and kill -9, SIGSTOP or a
  partition of the replica that is not leading.
- workload: spec and module changes, objects set to fail or succeed, running applies
  deleted, failed (accounted) Jobs deleted so the next attempt reuses their name.

A fault is counted when it happened: a triggered kill that found no matching write
within its wait is not."""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.chaos.observer import Observer
from tests.chaos.processes import Replica
from tests.chaos.proxy import Proxy
from tests.chaos.workload import Workload

log = logging.getLogger("chaos")
TRIGGERS = {
    "kill9-after-job-create": "job-create",
    "kill9-after-lease-take": "lease-take",
    "kill9-after-status-write": "status-write",
    "kill9-after-job-finish": "job-finish",
    "kill9-after-event": "event-create",
}
LEADER_FAULTS = {
    **dict.fromkeys(TRIGGERS, 3),
    "kill9-leader": 1,
    "sigterm-leader": 4,
    "sigstop-leader": 2,
    "partition-leader": 2,
}
STANDBY_FAULTS = {
    "reset-connections": 8,
    "kill9-standby": 1,
    "sigstop-standby": 1,
    "partition-standby": 1,
}
WORKLOAD_FAULTS = {
    "spec-change": 3,
    "module-change": 3,
    "fail-toggle": 3,
    "delete-running-apply": 2,
    "delete-failed-job": 2,
}
HANDOVER_WAIT = 60.0
TRIGGER_WAIT = 20.0
STANDBY_WARM = 5.0
PAIR_WAIT = 30.0


@dataclass
class Handover:
    fault: str
    seconds: float | None  # None: no new leader within HANDOVER_WAIT
    at: str  # wall-clock time of the fault, to find it in the logs


def _clock_time(monotonic: float) -> str:
    """The UTC wall-clock time (HH:MM:SS) of a time.monotonic() reading in the past."""
    return time.strftime("%H:%M:%S", time.gmtime(time.time() - (time.monotonic() - monotonic)))


@dataclass
class Faults:
    observer: Observer
    replicas: dict[str, Replica]
    proxies: dict[str, Proxy]
    workload: Workload
    restart_apiserver: Callable[[], Awaitable[float]]
    rng: random.Random
    budget: int
    rate: float  # faults per second in each of the standby and workload lanes
    fail_ratio: float
    restarts: int  # API server restarts, spread over the run
    counts: Counter[str] = field(default_factory=Counter)
    handovers: list[Handover] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    apiserver_restart_seconds: list[float] = field(default_factory=list)
    # While a handover is timed, nothing else is done to the standby or the API server.
    _handing_over: bool = False
    _restarting: bool = False

    @property
    def done(self) -> bool:
        return sum(self.counts.values()) >= self.budget

    def _count(self, kind: str, what: str = "") -> None:
        if not self.done:
            self.counts[kind] += 1
            log.info("fault %d %s %s", sum(self.counts.values()), kind, what)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._lane(self._leader_fault))
            tg.create_task(self._lane(self._standby_fault, paced=True))
            tg.create_task(self._lane(self._workload_fault, paced=True))
            tg.create_task(self._apiserver_lane())

    async def _lane(self, step: Callable[[], Awaitable[None]], paced: bool = False) -> None:
        while not self.done:
            try:
                await step()
            except Exception as err:  # the API server may be restarting: note it, go on
                self.errors[type(err).__name__] += 1
                log.warning("fault step failed: %r", err)
                await asyncio.sleep(1)
            if paced:
                await asyncio.sleep(self.rng.expovariate(self.rate))

    def _pick(self, weights: dict[str, int]) -> str:
        return self.rng.choices(list(weights), weights=list(weights.values()))[0]

    # -- the leader -------------------------------------------------------------------

    def leader(self) -> tuple[str, Replica] | None:
        """The replica holding the leader Lease, if it is running, not stopped and not
        told to stop."""
        for name, replica in self.replicas.items():
            inc = replica.current
            if (
                inc is not None
                and replica.alive()
                and not replica.paused()
                and not replica.ending()
                and self.observer.leader
                and inc.leader_identity() == self.observer.leader
            ):
                return name, replica
        return None

    def standby(self, leader: str | None) -> tuple[str, Replica] | None:
        others = [(n, r) for n, r in self.replicas.items() if n != leader and r.alive()]
        return others[0] if others else None

    def standby_ready(self, leader: str) -> bool:
        """A standby that can take over at once: running, not stopped, not stopping, not
        partitioned, and up long enough to have started its election loop."""
        found = self.standby(leader)
        if found is None:
            return False
        name, replica = found
        inc = replica.current
        return (
            not replica.paused()
            and not replica.ending()
            and not self.proxies[name].partitioned
            and inc is not None
            and time.monotonic() - inc.started > STANDBY_WARM
        )

    async def _wait_leader(self, within: float, *, with_standby: bool = False) -> bool:
        """Waits until there is a leader (and, if asked, a ready standby)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline and not self.done:
            found = self.leader()
            if found is not None and (not with_standby or self.standby_ready(found[0])):
                return True
            await asyncio.sleep(0.2)
        return False

    async def _leader_fault(self) -> None:
        if not await self._wait_leader(HANDOVER_WAIT):
            return
        # A fault on a leader whose standby is ready tests a handover; waited for a while,
        # then the fault goes ahead regardless.
        await self._wait_leader(PAIR_WAIT, with_standby=True)
        kind = self._pick(LEADER_FAULTS)
        try:
            if kind in TRIGGERS:
                await self._triggered_kill(kind)
            else:
                await self._at_leader(kind)
        finally:
            self._handing_over = False
        await asyncio.sleep(0.5)

    def _hit_leader(self, sig: int) -> tuple[str, bool] | None:
        """Signals the current leader; (its identity, whether a handover can be timed
        fairly), or None when there is no leader to hit."""
        found = self.leader()
        if found is None:
            return None
        name, replica = found
        old = self.observer.leader
        fair = self.standby_ready(name) and not self._restarting
        self._handing_over = True
        replica.signal(sig)
        return old, fair

    async def _triggered_kill(self, kind: str) -> None:
        fired: asyncio.Future[tuple[str, str, bool] | None] = (
            asyncio.get_running_loop().create_future()
        )

        def fire(what: str) -> None:
            # Inside the watch handler: the kill goes out before anything else runs, to
            # whichever process leads at this moment.
            hit = self._hit_leader(signal.SIGKILL)
            if not fired.done():
                fired.set_result(None if hit is None else (what, *hit))

        self.observer.arm(TRIGGERS[kind], fire)
        try:
            outcome = await asyncio.wait_for(fired, TRIGGER_WAIT)
        except TimeoutError:
            self.observer.disarm()
            return
        if outcome is None:
            return
        t0 = time.monotonic()
        what, old, fair = outcome
        self._count(kind, what)
        await self._time_handover(kind, old, fair, t0)

    async def _at_leader(self, kind: str) -> None:
        found = self.leader()
        if found is None:
            return
        name, replica = found
        if kind == "sigstop-leader":
            await self._stop_for(replica, self.rng.uniform(2, 25), kind)
            return
        if kind == "partition-leader":
            await self._partition_for(self.proxies[name], self.rng.uniform(2, 25), kind)
            return
        t0 = time.monotonic()
        hit = self._hit_leader(signal.SIGKILL if kind == "kill9-leader" else signal.SIGTERM)
        if hit is None:
            return
        self._count(kind)
        await self._time_handover(kind, *hit, t0)

    async def _time_handover(self, kind: str, old: str, fair: bool, t0: float) -> None:
        seconds = await self._handover(old, t0)
        if fair and not self._restarting:
            self.handovers.append(Handover(kind, seconds, _clock_time(t0)))

    async def _handover(self, old: str, since: float) -> float | None:
        """Seconds from `since` until a leader other than `old` holds the Lease."""
        deadline = since + HANDOVER_WAIT
        while time.monotonic() < deadline:
            for at, holder in self.observer.leader_changes:
                if at >= since and holder and holder != old:
                    return at - since
            await asyncio.sleep(0.1)
        return None

    async def _stop_for(self, replica: Replica, seconds: float, kind: str) -> None:
        if replica.signal(signal.SIGSTOP):
            self._count(kind, f"{seconds:.1f}s")
            await asyncio.sleep(seconds)
            replica.signal(signal.SIGCONT)

    async def _partition_for(self, proxy: Proxy, seconds: float, kind: str) -> None:
        proxy.partition()
        self._count(kind, f"{seconds:.1f}s")
        await asyncio.sleep(seconds)
        proxy.heal()

    # -- the standby and the network --------------------------------------------------

    async def _standby_fault(self) -> None:
        kind = self._pick(STANDBY_FAULTS)
        if kind == "reset-connections":
            name = self.rng.choice(sorted(self.proxies))
            n = self.proxies[name].reset()
            self._count(kind, f"{name}: {n} connections")
            return
        lead = self.leader()
        found = self.standby(lead[0] if lead else None)
        if found is None or lead is None or self._handing_over:
            return
        name, replica = found
        if kind == "kill9-standby":
            if replica.signal(signal.SIGKILL):
                self._count(kind)
        elif kind == "sigstop-standby":
            await self._stop_for(replica, self.rng.uniform(2, 20), kind)
        else:
            await self._partition_for(self.proxies[name], self.rng.uniform(2, 20), kind)

    # -- the workload -----------------------------------------------------------------

    async def _workload_fault(self) -> None:
        kind = self._pick(WORKLOAD_FAULTS)
        w = self.workload
        if kind == "spec-change":
            self._count(kind, await w.change_spec())
        elif kind == "module-change":
            self._count(kind, await w.change_module())
        elif kind == "fail-toggle":
            self._count(kind, await w.toggle_fail(self.fail_ratio))
        elif kind == "delete-running-apply":
            running = [j for j in self.observer.running_jobs() if j.op == "apply"]
            if running:
                job = self.rng.choice(running)
                if await w.delete_job(job.name):
                    self._count(kind, job.name)
        else:
            failed = [
                j
                for j in self.observer.jobs.values()
                if j.ended == "Failed" and j.accounted and not j.gone and j.op == "apply"
            ]
            if failed:
                job = max(failed, key=lambda j: j.end)
                if await w.delete_job(job.name):
                    self._count(kind, job.name)

    # -- the API server ---------------------------------------------------------------

    async def _apiserver_lane(self) -> None:
        if self.restarts <= 0:
            return
        every = self.budget / (self.restarts + 1)
        done = 0
        while not self.done and done < self.restarts:
            if sum(self.counts.values()) >= every * (done + 1) and not self._handing_over:
                self._restarting = True
                try:
                    took = await self.restart_apiserver()
                finally:
                    self._restarting = False
                self.apiserver_restart_seconds.append(took)
                done += 1
                self._count("apiserver-restart", f"{took:.1f}s")
            await asyncio.sleep(0.5)
