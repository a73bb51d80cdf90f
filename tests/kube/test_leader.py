"""Leader election on the real API server: failover between processes, clean
release, and optimistic concurrency (a stale resourceVersion loses with 409)."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.errors import ApiError
from runtime.leader import LeaderElector
from runtime.lease import micro_time
from runtime.transport import Transport, open_transport

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
# Shorter than the production 15/10/2 s so the test takes seconds, with the same ratios'
# intent: the lease outlasts the renew deadline, which allows several retries.
LEASE, RENEW, RETRY = 8.0, 5.0, 0.5
# A standby polls every RETRY * (1 + up to 1.2); slack covers process scheduling on a busy machine.
POLL, SLACK = RETRY * 2.2, 2.0


class Candidate:
    """A `tests.kube.leader_proc` process and the lines it printed."""

    def __init__(self, apiserver: ApiServer, namespace: str, identity: str) -> None:
        self.identity = identity
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "tests.kube.leader_proc",
                "--kubeconfig", str(apiserver.kubeconfig), "--namespace", namespace,
                "--name", "failover", "--identity", identity,
                "--lease", str(LEASE), "--renew", str(RENEW), "--retry", str(RETRY),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def expect(self, line: str, within: float) -> float:
        """Seconds until `line` was printed; fails after `within`."""
        start = time.monotonic()
        try:
            got = self.lines.get(timeout=within)
        except queue.Empty:
            pytest.fail(f"{self.identity}: no {line!r} within {within}s")
        assert got == line
        return time.monotonic() - start

    def silent_for(self, seconds: float) -> bool:
        try:
            self.lines.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def start(apiserver: ApiServer, namespace: str) -> Iterator[Callable[[str], Candidate]]:
    """Starts a candidate process by identity; every one started is stopped after the test."""
    started: list[Candidate] = []

    def start(identity: str) -> Candidate:
        started.append(Candidate(apiserver, namespace, identity))
        return started[-1]

    yield start
    for c in started:
        c.stop()


def _lease(apiserver: ApiServer, namespace: str) -> dict[str, Any]:
    return apiserver.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/failover"
    )


def test_failover_after_a_kill_and_at_once_after_a_clean_release(
    apiserver: ApiServer, namespace: str, start: Callable[[str], Candidate]
) -> None:
    a = start("a")
    a.expect("LEADER a", within=30)
    b = start("b")
    assert b.silent_for(LEASE + 2), "a standby must not lead while the leader renews"
    assert _lease(apiserver, namespace)["spec"]["holderIdentity"] == "a"

    # A crash: no release, so `b` waits for the Lease to expire (at most LEASE after
    # a's last renewal), then takes it.
    a.proc.send_signal(signal.SIGKILL)
    took = b.expect("LEADER b", within=LEASE + POLL + SLACK)
    assert took >= LEASE - RETRY - SLACK, "took over before the lease could have expired"
    spec = _lease(apiserver, namespace)["spec"]
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1

    # A clean shutdown releases: the waiting standby takes over at its next poll,
    # well before the lease duration.
    c = start("c")
    assert c.silent_for(3)
    b.proc.send_signal(signal.SIGTERM)
    b.expect("RELEASED", within=10)
    assert b.proc.wait(10) == 0
    assert c.expect("LEADER c", within=POLL + SLACK) < LEASE / 2
    assert _lease(apiserver, namespace)["spec"]["holderIdentity"] == "c"


def test_a_leader_paused_past_its_renew_deadline_exits_non_zero(
    apiserver: ApiServer, namespace: str, start: Callable[[str], Candidate]
) -> None:
    a = start("a")
    a.expect("LEADER a", within=30)
    b = start("b")
    # A stop-the-world pause (GC, a frozen VM): `a` cannot renew, `b` takes over.
    a.proc.send_signal(signal.SIGSTOP)
    b.expect("LEADER b", within=LEASE + POLL + SLACK)
    a.proc.send_signal(signal.SIGCONT)
    # On waking, `a` must not act on the Lease it no longer holds: it stops and exits 1.
    a.expect("LOST", within=RETRY + SLACK)
    assert a.proc.wait(10) == 1
    assert _lease(apiserver, namespace)["spec"]["holderIdentity"] == "b"


class Racer:
    """Passes requests through, but right before the elector's first PUT another
    writer renews the Lease for itself: the elector's write carries a stale
    resourceVersion."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.raced = False

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        timeout: float = 30.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        if method == "PUT" and not self.raced:
            self.raced = True
            current = await self.transport.request("GET", path)
            current["spec"].update(holderIdentity="racer", renewTime=micro_time(LoopClock().now()))
            await self.transport.request("PUT", path, body=current)
        return await self.transport.request(method, path, body=body, timeout=timeout)

    def stream(
        self, path: str, *, params: Mapping[str, str]
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return self.transport.stream(path, params=params)


async def test_a_stale_resource_version_loses_with_409(
    apiserver: ApiServer, namespace: str
) -> None:
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/race"
        me = LeaderElector(
            transport, namespace=namespace, name="race", clock=LoopClock(), identity="me"
        )
        assert await me.try_acquire_or_renew()
        stale = await transport.request("GET", path)

        # The API server itself: a write carrying an old resourceVersion is refused.
        assert await me.try_acquire_or_renew()  # a renewal moves the resourceVersion on
        with pytest.raises(ApiError) as refused:
            await transport.request("PUT", path, body=stale)
        assert (refused.value.status, refused.value.reason) == (409, "Conflict")

        # The elector: losing the race for a write is a lost round, not an error.
        raced = LeaderElector(
            Racer(transport), namespace=namespace, name="race", clock=LoopClock(), identity="me"
        )
        assert not await raced.try_acquire_or_renew()
        lease = await transport.request("GET", path)
        assert lease["spec"]["holderIdentity"] == "racer"
        # And the next round sees the racer's valid Lease and waits.
        assert not await me.try_acquire_or_renew()
        assert me.observed_holder == "racer"
