"""`captf run` as the processes a Deployment runs, on the real API server: how they stop,
hand over the leader Lease, and answer their probes.

Each replica is a real `captf run --leader-elect` process with the production Lease
timings (15 s lease, 10 s renew deadline, 2 s retry). Handover times are measured
from the signal to the new leader's "leading as" line and printed."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.envtest import ApiServer
from runtime.leader import LEASE_DURATION, RETRY_PERIOD

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
LEADING = re.compile(r"leading as ([\w.-]+)")
SERVING = re.compile(r"metrics and health on http://([\w.:\[\]]+)/metrics")
# A clean stop: the standby wakes on the release instead of at its next poll.
CLEAN_HANDOVER = 5.0
# A crash: the Lease must expire (15 s after the last renewal), then the next poll.
CRASH_HANDOVER = LEASE_DURATION + 2 * RETRY_PERIOD + 1
# Starting a Python process and syncing caches on a loaded 2-core machine.
START = 60.0


class Replica:
    """One `captf run --leader-elect` process, named like a pod, and its log lines."""

    def __init__(self, apiserver: ApiServer, namespace: str, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "controller.cli.main", "run", "--leader-elect",
                "--log-format=text", "--kubeconfig", str(apiserver.kubeconfig),
                "--namespace", namespace, "--controller-namespace", namespace,
                "--metrics-addr", "127.0.0.1:0",
            ],
            cwd=REPO,
            env={**os.environ, "POD_NAME": name},
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.address = self.expect(SERVING, within=START).group(1)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip())

    def expect(self, pattern: re.Pattern[str], within: float) -> re.Match[str]:
        deadline = time.monotonic() + within
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.log.append(line)
            if found := pattern.search(line):
                return found
        pytest.fail(f"{self.name}: no {pattern.pattern!r} within {within}s; log: {self.log}")

    def probe(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://{self.address}{path}", timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return error.code

    def ready_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.probe("/readyz") == 200:
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def start(apiserver: ApiServer, namespace: str) -> Iterator[Callable[[str], Replica]]:
    started: list[Replica] = []

    def start(name: str) -> Replica:
        started.append(Replica(apiserver, namespace, name))
        return started[-1]

    yield start
    for replica in started:
        replica.stop()


def _holder(apiserver: ApiServer, namespace: str) -> str | None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/captf-controller"
    holder: str | None = apiserver.request("GET", path)["spec"].get("holderIdentity")
    return holder


def _handover(
    old: Replica, how: signal.Signals, standbys: list[Replica], within: float
) -> tuple[Replica, float]:
    """Signals the leader `old`; returns the standby that took over and the seconds it took."""
    sent = time.monotonic()
    old.proc.send_signal(how)
    deadline = sent + within
    while time.monotonic() < deadline:
        for standby in standbys:
            try:
                line = standby.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            standby.log.append(line)
            if LEADING.search(line):
                took = time.monotonic() - sent
                print(f"handover after {how.name}: {took:.2f}s ({old.name} -> {standby.name})")
                return standby, took
    pytest.fail(f"no standby took over within {within}s of {how.name}")


def test_stops_release_the_lease_at_once_and_a_crash_waits_for_it_to_expire(
    apiserver: ApiServer, namespace: str, start: Callable[[str], Replica]
) -> None:
    a = start("a")
    identity = a.expect(LEADING, within=START).group(1)
    assert identity.startswith("a_"), "the identity names the pod"
    assert a.ready_within(START), "a leader is ready once its caches have synced"
    b, c = start("b"), start("c")
    # A standby serves its role by campaigning: Ready, or a 2-replica Deployment never is.
    assert b.ready_within(START)
    assert c.ready_within(START)
    assert b.probe("/healthz") == 200
    assert _holder(apiserver, namespace) == identity

    # SIGTERM (what the kubelet sends): finish, release, exit 0; a standby leads at once.
    leader, took = _handover(a, signal.SIGTERM, [b, c], within=CLEAN_HANDOVER)
    assert a.proc.wait(10) == 0
    assert took <= CLEAN_HANDOVER
    # SIGINT (Ctrl-C) is the same clean stop.
    other = c if leader is b else b
    leader, took = _handover(leader, signal.SIGINT, [other], within=CLEAN_HANDOVER)
    assert took <= CLEAN_HANDOVER

    # SIGKILL: nothing is released; the standby waits out the Lease.
    d = start("d")
    assert d.ready_within(START)
    _, took = _handover(leader, signal.SIGKILL, [d], within=CRASH_HANDOVER)
    assert took <= CRASH_HANDOVER
    assert _holder(apiserver, namespace) is not None


def test_a_standby_stops_at_once_and_exits_0(
    apiserver: ApiServer, namespace: str, start: Callable[[str], Replica]
) -> None:
    a = start("a")
    a.expect(LEADING, within=START)
    b = start("b")
    assert b.ready_within(START)
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(10) == 0
    holder = _holder(apiserver, namespace)
    assert holder is not None
    assert holder.startswith("a_")


def test_a_busy_metrics_port_is_one_line_and_exit_2(apiserver: ApiServer, namespace: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        done = subprocess.run(
            [
                sys.executable, "-m", "controller.cli.main", "run", "--no-leader-elect",
                "--kubeconfig", str(apiserver.kubeconfig), "--namespace", namespace,
                "--metrics-addr", address,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"captf run: --metrics-addr: cannot listen on {address}: ")
    assert "in use" in line


def test_a_busy_webhook_port_names_its_flag(apiserver: ApiServer, namespace: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        address = f"127.0.0.1:{busy.getsockname()[1]}"
        done = subprocess.run(
            [
                sys.executable, "-m", "controller.cli.main", "run", "--no-leader-elect",
                "--kubeconfig", str(apiserver.kubeconfig), "--namespace", namespace,
                "--metrics-addr", "127.0.0.1:0", "--webhook-addr", address,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"captf run: --webhook-addr: cannot listen on {address}: ")
