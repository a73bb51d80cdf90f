"""What runs the Jobs: the one pluggable piece of the system under test.

A runner is an async context manager given a `Setting`: it talks to the API server
directly (never through a controller's proxy: the faults are aimed at the
controllers) and writes Job timestamps on the controllers' scaled timeline, whose
origin is recorded in the API server (runtime/timeorigin.py). To add one, write a class
of this shape and name it in `RUNNERS`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from controller.executor import Executor
from controller.io.main import TIME_ORIGIN
from runtime.timeorigin import scaled_clock
from runtime.transport import open_transport


@dataclass(frozen=True)
class Setting:
    kubeconfig: Path  # the API server's own, admin
    namespace: str  # the workload's
    controller_namespace: str  # where the time origin is recorded
    time_scale: float
    logs: Path


class JobRunner(Protocol):
    name: str

    def running(self, setting: Setting) -> contextlib.AbstractAsyncContextManager[None]: ...


class ExecutorRunner:
    """The local Job executor, in the harness's own event loop, on the shared scaled
    clock: it runs each Job's runner (and OpenTofu) as a local process and writes the
    Job status as the Job controller would. (As a separate `captf dev executor` its
    clock would start its own timeline.)"""

    name = "executor"

    @contextlib.asynccontextmanager
    async def running(self, setting: Setting) -> AsyncIterator[None]:
        async with open_transport(str(setting.kubeconfig)) as transport:
            clock = await scaled_clock(
                transport, setting.controller_namespace, TIME_ORIGIN, setting.time_scale
            )
            async with Executor(
                transport,
                clock=clock,
                namespace=setting.namespace,
                kubeconfig=setting.kubeconfig,
                log_dir=setting.logs / "jobs",
            ):
                yield


RUNNERS: dict[str, type[JobRunner]] = {"executor": ExecutorRunner}
