"""A container's main process, run locally: its own session, its output in a log file.

Its own session keeps a Ctrl-C on the node's terminal from reaching it
directly: the node decides when a container gets SIGTERM, exactly once, as
kubelet does (the runner forwards that one signal to tofu). Signals go to the
whole process group, and when the main process ends whatever it left behind in
its group is killed, as the end of a container would."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import anyio

from runtime.clock import Clock

_PR_SET_PDEATHSIG = 1


class Process(Protocol):
    """What a pod's lifecycle needs of a running container."""

    @property
    def pid(self) -> int: ...

    async def wait(self) -> int:
        """The exit code in container terms: 128 + N for death by signal N."""
        ...

    def signal(self, sig: signal.Signals) -> None: ...


class LocalProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        # Set once the process was reaped and its group killed: the group id may then be
        # reused by an unrelated process, so no signal is sent to it any more.
        self._over = False

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def wait(self) -> int:
        code = await self._proc.wait()
        # The container is over: nothing it started may outlive it.
        self.signal(signal.SIGKILL)
        self._over = True
        return 128 - code if code < 0 else code

    def signal(self, sig: signal.Signals) -> None:
        if self._over:
            return
        # The group id is the pid (a new session); it stays reserved while any member lives.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)


async def spawn(
    argv: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path | None = None
) -> LocalProcess:
    """Start `argv` in `cwd` with exactly `env`, stdout and stderr appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
            preexec_fn=_terminate_with_parent(os.getpid()),
        )
    return LocalProcess(proc)


def _terminate_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: SIGTERM when the node dies without stopping its children, so a
    killed node leaves no runner behind (and the runner still reports `interrupted`)."""

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


async def wait_within(process: Process, seconds: float, clock: Clock) -> int | None:
    """The exit code if the process ends within `seconds` of `clock` time, else None."""
    code: int | None = None
    async with anyio.create_task_group() as group:

        async def expire() -> None:
            await clock.sleep(seconds)
            group.cancel_scope.cancel()

        group.start_soon(expire)
        code = await process.wait()
        group.cancel_scope.cancel()
    return code


async def terminate(process: Process, grace: float, clock: Clock) -> int:
    """kubelet's stop: SIGTERM, `grace` seconds to exit, then SIGKILL."""
    process.signal(signal.SIGTERM)
    code = await wait_within(process, grace, clock)
    if code is not None:
        return code
    process.signal(signal.SIGKILL)
    return await process.wait()
