"""The processes the bench measures from outside: the controller as a child process, an
outside watch that times status writes, CPU seconds and the RSS high-water mark."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from controller.core.basics.names import (
    CLUSTER,
)
from controller.io.api import OBJECTS

CLUSTERS = OBJECTS[CLUSTER]
PER_NAMESPACE = 100
JOBS_PER_OBJECT = 3
CONCURRENCY = 32
CONTROLLER_NAMESPACE = "captf-system"
# Quiet this long and the controller has settled.
SETTLE_SECONDS = 3.0
MIB = 1 << 20


class Controller:
    """`captf run` as a child process, with its RSS, its readiness and its metrics."""

    def __init__(self, kubeconfig: str) -> None:
        self._kubeconfig = kubeconfig
        self._port = free_port()
        self._process: asyncio.subprocess.Process | None = None
        self._log = Path(os.environ.get("CAPTF_BENCH_LOG", "/tmp/captf-bench-controller.log"))
        self.started_at = 0.0

    async def __aenter__(self) -> Controller:
        argv = [
            sys.executable,
            "-m",
            "controller.cli.main",
            "run",
            "--kubeconfig",
            self._kubeconfig,
            "--no-leader-elect",
            "--controller-namespace",
            CONTROLLER_NAMESPACE,
            "--metrics-addr",
            f"127.0.0.1:{self._port}",
        ]
        # CAPTF_BENCH_SOURCE: run the controller from another source tree (an older
        # commit's, to measure a change against what it replaced).
        source = os.environ.get("CAPTF_BENCH_SOURCE")
        env = os.environ | ({"PYTHONPATH": source} if source else {})
        with self._log.open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=log, env=env, cwd=source or None
            )
        self.started_at = time.monotonic()
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._process is not None
        self._process.terminate()
        try:
            async with asyncio.timeout(30):
                await self._process.wait()
        except TimeoutError:
            self._process.kill()
            await self._process.wait()

    async def ready(self, within: float = 600.0) -> None:
        deadline = time.monotonic() + within
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                try:
                    async with session.get(f"http://127.0.0.1:{self._port}/readyz") as answer:
                        if answer.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise TimeoutError("the controller never became ready")

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def rss_mib(self) -> float:
        return self._status_kib("VmRSS") / 1024

    def peak_mib(self) -> float:
        return self._status_kib("VmHWM") / 1024

    def _status_kib(self, field_name: str) -> int:
        assert self._process is not None
        try:
            status = Path(f"/proc/{self._process.pid}/status").read_text()
        except FileNotFoundError:  # the process has ended
            return 0
        for line in status.splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
        return 0

    async def metric(self, name: str) -> float:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self._port}/metrics") as answer,
        ):
            text = await answer.text()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and not line.startswith("#")
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Outside:
    """An outside watch on every TerraformCluster: status writes, and changes answered."""

    statuses: int = 0
    writes: int = 0
    last_write: float = field(default_factory=time.monotonic)
    # key -> (send time, the generation the patch made); latency in ms once answered
    pending: dict[str, tuple[float, int]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    # key -> (the last status.observedGeneration seen, when)
    seen: dict[str, tuple[int, float]] = field(default_factory=dict)
    refused: int = 0

    def sent(self, key: str, at: float, generation: int) -> None:
        """A patch sent at `at` made `generation`; its answer may have been seen already."""
        observed, when = self.seen.get(key, (0, 0.0))
        if observed >= generation:
            self.latencies.append((when - at) * 1000)
        else:
            self.pending[key] = (at, generation)

    def __call__(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if old is None or new is None:
            return
        self.writes += 1
        self.last_write = time.monotonic()
        if "status" in new and "status" not in old:
            self.statuses += 1
        meta = new["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        observed = int((new.get("status") or {}).get("observedGeneration", 0))
        self.seen[key] = (observed, self.last_write)
        sent = self.pending.get(key)
        if sent is not None and observed >= sent[1]:
            del self.pending[key]
            self.latencies.append((self.last_write - sent[0]) * 1000)


class CpuMeter:
    """CPU seconds (user and system) each process has used, lap by lap: where the time
    of a phase went, the controller's or the API server's (they share the machine)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self._last = self._read()

    def lap(self) -> dict[str, float]:
        now = self._read()
        used = {name: round(now[name] - self._last.get(name, 0.0), 2) for name in now}
        self._last = now
        return used

    def _read(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self._pids.items()}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (0 once it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return 0.0
    # The command name, in parentheses, may hold spaces: count fields after its end.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Peak:
    controller: Controller
    highest: float = 0.0

    async def sample(self) -> None:
        while True:
            self.highest = max(self.highest, self.controller.rss_mib())
            await asyncio.sleep(0.2)
