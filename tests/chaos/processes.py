"""Child processes of the harness: one supervised controller replica, and any other daemon.

A replica is restarted one second after it exits, whatever the cause (a kill, a lost
Lease, a crash), as a Deployment's pod would be; each start is an `Incarnation` with its
own log. Signals go to the current process only. Children get their own session, so the
terminal's Ctrl-C reaches only the harness, which stops them in order."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LEADING = re.compile(r"leading as ([\w.:-]+)")
RESTART_DELAY = 1.0
STOP_GRACE = 15.0


@dataclass
class Incarnation:
    pid: int
    log: Path
    started: float  # time.monotonic()
    exit_code: int | None = None
    identity: str = ""

    def leader_identity(self) -> str:
        """The Lease identity this process leads as, once it logged it."""
        if not self.identity and self.log.exists():
            found = LEADING.search(self.log.read_text(errors="replace"))
            if found:
                self.identity = found.group(1)
        return self.identity


async def spawn(argv: Sequence[str], log: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    log.parent.mkdir(parents=True, exist_ok=True)
    # A fresh file: a reused workdir holds the logs of an earlier run under the same names,
    # and an identity read from them would never match this run's leader.
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


async def stop(proc: asyncio.subprocess.Process, grace: float = STOP_GRACE) -> int:
    """SIGTERM (and SIGCONT, in case it is stopped), SIGKILL after the grace period."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
            proc.send_signal(signal.SIGCONT)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    return await proc.wait()


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def captf(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller.cli.main", *args]


@dataclass
class Replica:
    """One controller replica slot (`a` or `b`), kept running until `stopping`."""

    name: str
    argv: list[str]
    logs: Path
    metrics_port: int
    incarnations: list[Incarnation] = field(default_factory=list)
    _proc: asyncio.subprocess.Process | None = None
    _stopping: bool = False
    _stopped_by_signal: set[int] = field(default_factory=set)
    _ending: set[int] = field(default_factory=set)  # pids sent SIGTERM or SIGKILL

    @property
    def current(self) -> Incarnation | None:
        return self.incarnations[-1] if self.incarnations else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def signal(self, sig: int) -> bool:
        """Sends `sig` to the running process; False if none runs."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return False
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            return False
        if sig in (signal.SIGTERM, signal.SIGKILL):
            self._ending.add(proc.pid)
        if sig == signal.SIGSTOP:
            self._stopped_by_signal.add(proc.pid)
        elif sig == signal.SIGCONT:
            self._stopped_by_signal.discard(proc.pid)
        return True

    def ending(self) -> bool:
        """The current process was told to stop (it may still be shutting down)."""
        return self._proc is not None and self._proc.pid in self._ending

    def paused(self) -> bool:
        return self._proc is not None and self._proc.pid in self._stopped_by_signal

    async def supervise(self) -> None:
        """Runs the replica, restarting it after every exit, until cancelled."""
        try:
            while not self._stopping:
                n = len(self.incarnations)
                log = self.logs / f"controller-{self.name}.{n}.log"
                proc = await spawn(self.argv, log, child_env())
                self._proc = proc
                self.incarnations.append(Incarnation(proc.pid, log, time.monotonic()))
                code = await proc.wait()
                self.incarnations[-1].exit_code = code
                await asyncio.sleep(RESTART_DELAY)
        finally:
            if self._proc is not None:
                await asyncio.shield(stop(self._proc))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Replica]:
        task = asyncio.create_task(self.supervise(), name=f"replica {self.name}")
        try:
            yield self
        finally:
            self._stopping = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def metrics(self) -> str | None:
        """The current process's /metrics text, or None if it does not answer."""
        if not self.alive() or self.paused():
            return None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.metrics_port), 2
            )
        except (OSError, TimeoutError):
            return None
        try:
            writer.write(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            body = await asyncio.wait_for(reader.read(), 5)
        except (OSError, TimeoutError):
            return None
        finally:
            writer.close()
        head, _, text = body.partition(b"\r\n\r\n")
        return (
            text.decode(errors="replace")
            if head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n")[0]
            else None
        )
