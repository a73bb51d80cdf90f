"""The executor: a watch on Jobs, and one task per Job it runs.

    async with open_transport(kubeconfig) as transport:
        async with Executor(transport, time_scale=30, kubeconfig=kubeconfig) as executor:
            ...
            executor.drain("ns", "job")

Which Jobs: those labelled `captf.io/op`, not suspended, not finished, not being
deleted. A Job is run at most once by an executor (by uid): a Job that already
has a `startTime` when first seen was started by an executor that is gone, and
its process with it, so it is failed as lost (BackoffLimitExceeded) instead of
run a second time."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from controller.core.names import ANN_SIMULATE_DRAIN, LABEL_OP
from controller.executor.kube import KubeJobs, Requester
from controller.executor.lifecycle import JobRun, Node
from controller.executor.process import spawn
from controller.executor.status import Lost, is_terminal, next_status
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from runtime.cache import Informer, Resource, Selection
from runtime.cache.watchstream import StreamTransport
from runtime.clock import Clock, LoopClock
from runtime.lifecycle import RunsInContext

logger = logging.getLogger("controller.executor")

Json = dict[str, Any]

JOBS = Resource("batch", "v1", "jobs")
# For people: annotate a running Job with this set to "true" to have its pod drained.
DEFAULT_LOG_DIR = Path(".local/executor-logs")
# Passed from the executor's environment to every process: what a local interpreter and
# tofu need to work at all. Everything else a process sees comes from its Job.
HOST_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
LOST_MESSAGE = "Job was started by an executor that is gone; its process is lost"


class ExecutorTransport(Requester, StreamTransport, Protocol):
    """Requests and watches: `runtime.transport.Transport`."""


class Executor(RunsInContext):
    def __init__(
        self,
        transport: ExecutorTransport,
        *,
        clock: Clock | None = None,
        time_scale: float = 1.0,
        namespace: str | None = None,
        kubeconfig: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] = DEFAULT_LOG_DIR,
        image_env: Mapping[str, str] | None = None,
    ) -> None:
        """`clock` is Job time (activeDeadlineSeconds, grace periods, status timestamps);
        by default `LoopClock(time_scale)`, so a deadline of D seconds passes after D/K
        real seconds. A given clock carries its own scale: passing both is an error.

        `kubeconfig` is what each process gets as KUBECONFIG (default: $KUBECONFIG, then
        ~/.kube/config). `image_env` stands for the runner image's ENV (default: the tofu
        build's `runner_environ`, when a build exists)."""
        if clock is not None and time_scale != 1.0:
            raise ValueError("pass a clock or a time_scale, not both: the clock carries the scale")
        self._transport = transport
        self._clock: Clock = clock or LoopClock(time_scale)
        self._namespace = namespace
        self._kubeconfig = kubeconfig
        self._log_dir = Path(log_dir).absolute()
        self._image_env = image_env
        # Jobs with a live task, by uid; a uid leaves when its task ends.
        self._runs: dict[str, JobRun] = {}
        # Every uid this executor ran or judged lost: never run again, even when a stale
        # event shows it unfinished. A uid leaves only when its Job is deleted.
        self._seen: set[str] = set()
        self._tasks: TaskGroup | None = None
        self._node: Node | None = None

    def drain(self, namespace: str, name: str) -> bool:
        """Drain the pod of a running Job; False when this executor runs no such Job."""
        for run in self._runs.values():
            if (run.namespace, run.name) == (namespace, name):
                run.drain()
                return True
        return False

    def running_jobs(self) -> list[str]:
        """The "namespace/name" of every Job with a live process or one about to start."""
        return sorted(run.key for run in self._runs.values())

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Executor]:
        """Watch and run until the block exits; then stop every process (SIGTERM, grace,
        SIGKILL) and return only when all are gone."""
        image_env = self._image_env
        if image_env is None:
            image_env = await anyio.to_thread.run_sync(_tofu_env)
        self._node = Node(
            clock=self._clock,
            spawn=spawn,
            log_dir=self._log_dir,
            image_env={**_host_env(), **image_env},
            forced_env={"KUBECONFIG": _kubeconfig_path(self._kubeconfig)},
        )
        # Retries and watch backoff wait real time: an API server's recovery does not
        # speed up with the demo.
        real = LoopClock()
        api = KubeJobs(self._transport, real)
        selection = Selection(namespace=self._namespace, label_selector=LABEL_OP)
        informer = Informer(self._transport, JOBS, clock=real, selection=selection)
        informer.add_handler(lambda old, new: self._on_change(api, old, new))
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                async with informer:
                    await informer.wait_synced()
                    yield self
            finally:
                tasks.cancel_scope.cancel()
                self._tasks = None

    def _on_change(self, api: KubeJobs, old: Json | None, new: Json | None) -> None:
        if new is None:
            if old is not None:
                self._on_delete(old)
            return
        meta = new["metadata"]
        run = self._runs.get(meta["uid"])
        if run is not None:
            # A Job finished by anyone but this run has no use for its pod any more.
            if meta.get("deletionTimestamp") or is_terminal(new.get("status") or {}):
                run.kill()
            elif (meta.get("annotations") or {}).get(ANN_SIMULATE_DRAIN) == "true":
                run.drain()
            return
        if meta["uid"] in self._seen or not _wanted(new):
            return
        self._seen.add(meta["uid"])
        assert self._tasks is not None, "changes arrive only while running"
        assert self._node is not None, "changes arrive only while running"
        if (new.get("status") or {}).get("startTime"):
            self._tasks.start_soon(self._fail_lost, api, new)
            return
        run = JobRun(new, api, self._node)
        self._runs[run.uid] = run
        self._tasks.start_soon(self._run, run)
        if (meta.get("annotations") or {}).get(ANN_SIMULATE_DRAIN) == "true":
            run.drain()

    def _on_delete(self, old: Json) -> None:
        uid = old["metadata"]["uid"]
        self._seen.discard(uid)
        run = self._runs.get(uid)
        if run is not None:
            run.kill()

    async def _run(self, run: JobRun) -> None:
        try:
            await run.run()
        except Exception:
            # One Job's trouble (a rejected status, a command that cannot start) is that
            # Job's: the executor goes on running the others.
            logger.exception("%s: executor error", run.key)
        finally:
            self._runs.pop(run.uid, None)

    async def _fail_lost(self, api: KubeJobs, job: Json) -> None:
        meta = job["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        now = self._clock.now()
        try:
            written = await api.update_status(
                meta["namespace"],
                meta["name"],
                meta["uid"],
                lambda status: next_status(status, Lost(LOST_MESSAGE), now),
            )
        except Exception:
            logger.exception("%s: could not fail the lost Job", key)
            return
        if written is not None:
            logger.info("%s: started before this executor and unfinished: failed as lost", key)


def _wanted(job: Json) -> bool:
    if job["metadata"].get("deletionTimestamp"):
        return False
    if (job.get("spec") or {}).get("suspend"):
        return False
    return not is_terminal(job.get("status") or {})


def _host_env() -> dict[str, str]:
    return {name: os.environ[name] for name in HOST_ENV if name in os.environ}


def _kubeconfig_path(kubeconfig: str | os.PathLike[str] | None) -> str:
    """As the transport finds it; absolute, as a process may change directory."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return str(Path(path or Path.home() / ".kube" / "config").absolute())


def _tofu_env() -> dict[str, str]:
    try:
        return runner_environ(tofu_dir(build=False))
    except TofuMissing as exc:
        logger.warning("no OpenTofu build, runner Jobs will not find tofu: %s", exc)
        return {}
