"""What runs the Jobs: the one pluggable piece of the system under test.

Each kind is an async context manager started with the API server's direct kubeconfig
(never through a controller's proxy: faults are aimed at the controllers). To add one,
write a class with this shape and name it in `RUNNERS`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

from tests.chaos.processes import captf, child_env, spawn, stop


class JobRunner(Protocol):
    name: str

    def running(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    def alive(self) -> bool: ...


class ExecutorRunner:
    """`captf dev executor` on the workload's namespace: runs each Job's runner (and
    OpenTofu) as a local process and writes the Job status, with wall-clock timestamps
    as a Job controller would."""

    name = "executor"

    def __init__(self, kubeconfig: Path, namespace: str, logs: Path) -> None:
        self._kubeconfig = kubeconfig
        self._namespace = namespace
        self._logs = logs
        self._proc: asyncio.subprocess.Process | None = None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        argv = captf(
            "dev", "executor", "--kubeconfig", str(self._kubeconfig), "--namespace", self._namespace
        )
        env = child_env(CAPTF_EXECUTOR_LOGS=str(self._logs / "jobs"))
        self._proc = await spawn(argv, self._logs / "executor.log", env)
        try:
            yield
        finally:
            await stop(self._proc, grace=60)


RUNNERS = {"executor": ExecutorRunner}
