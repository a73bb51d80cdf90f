"""One Job, from pod creation to its terminal status: the kubelet and the Job controller at once.

  created    -> startTime, active 1; the environment is resolved (a missing
                Secret is waited for, as kubelet does), the process starts, ready 1
  exit 0     -> SuccessCriteriaMet + Complete
  exit != 0  -> FailureTarget + Failed, BackoffLimitExceeded (runner Jobs have backoffLimit 0)
  deadline   -> FailureTarget DeadlineExceeded, SIGTERM, grace, SIGKILL, then Failed
  drain      -> SIGTERM and FailureTarget PodFailurePolicy (if the Job has a FailJob rule on
                DisruptionTarget, else BackoffLimitExceeded), then Failed
  deleted    -> SIGTERM, grace, SIGKILL; no status (there is no Job to write it to);
                the same for a Job that someone else marked finished
  cancelled  -> (executor shutdown) SIGTERM, grace, SIGKILL; no status: a restarted
                executor finds the Job started and unfinished, and fails it as lost

A stop request is taken once; later ones are ignored, as a pod is deleted once."""

from __future__ import annotations

import logging
import secrets
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import anyio

from controller.executor import container as ctr
from controller.executor.process import Process, terminate
from controller.executor.status import (
    Created,
    Event,
    Exited,
    Reason,
    Running,
    Stopping,
    next_status,
)
from runtime.clock import Clock

logger = logging.getLogger("controller.executor")

Json = dict[str, Any]

# kubelet's default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30.0
# How often a missing Secret or ConfigMap is looked for again (kubelet retries its pod sync).
ENV_RETRY_SECONDS = 2.0
# What a container runtime reports for a container that could not start.
START_ERROR_CODE = 128


class JobApi(ctr.ObjectReader, Protocol):
    async def update_status(
        self, namespace: str, name: str, uid: str, build: Callable[[Json], Json | None]
    ) -> Json | None:
        """Write `build(current status)` through the status subresource, re-reading on a
        conflict; None when `build` declines or the Job (with this uid) is gone."""
        ...


class Spawner(Protocol):
    async def __call__(self, argv: Sequence[str], env: Mapping[str, str], log: Path) -> Process: ...


@dataclass(frozen=True)
class Node:
    """What every Job run shares: where it runs and what a pod gets besides its own env."""

    clock: Clock
    spawn: Spawner
    log_dir: Path
    # Variables below the container's own, as an image's ENV (the tofu build).
    image_env: Mapping[str, str] = field(default_factory=dict)
    # Variables above the container's own: KUBECONFIG replaces in-cluster access.
    forced_env: Mapping[str, str] = field(default_factory=dict)
    name: str = "local"


class JobRun:
    def __init__(self, job: Json, api: JobApi, node: Node) -> None:
        meta = job["metadata"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.uid: str = meta["uid"]
        self.log = node.log_dir / self.namespace / f"{self.name}.log"
        self._job = job
        self._api = api
        self._node = node
        self._pod_name = f"{self.name}-{secrets.token_hex(3)[:5]}"
        self._stop_requested = anyio.Event()
        # Why the pod is being stopped; None with _stop_requested set: killed, no status.
        self._stop: Stopping | None = None
        self._process: Process | None = None
        # The container's exit code, once it is known.
        self.code: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def drain(self) -> None:
        """Evict the pod: SIGTERM, and the Job fails as its pod failure policy says."""
        self._request_stop(_disruption(self._job, self._pod_name))

    def kill(self) -> None:
        """Stop the pod and write nothing: its Job was deleted, or finished by someone else."""
        self._request_stop(None)

    def _request_stop(self, stop: Stopping | None) -> None:
        if not self._stop_requested.is_set():
            self._stop = stop
            self._stop_requested.set()

    async def run(self) -> None:
        if await self._write(Created()) is None:
            logger.info("%s: already started or finished elsewhere; not running it", self.key)
            return
        started = self._node.clock.monotonic()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._enforce_deadline)
                await self._until_stopped(self._start)
                if self._process is not None:
                    self.code = await self._supervise(self._process)
                group.cancel_scope.cancel()
        finally:
            if self._process is not None and self.code is None:
                with anyio.CancelScope(shield=True):
                    code = await terminate(self._process, self._grace(), self._node.clock)
                    logger.info("%s: stopped by the executor's shutdown, exit %d", self.key, code)
        if self._stop_requested.is_set() and self._stop is None:
            logger.info("%s: deleted or finished elsewhere; stopped, exit %s", self.key, self.code)
            return
        # Stopped before it could start: the pod fails all the same.
        code = self.code if self.code is not None else 1
        final = await self._write(Exited(code, self._stop))
        elapsed = self._node.clock.monotonic() - started
        logger.info(
            "%s: %s, exit %s, %.1fs, log %s", self.key, _verdict(final), code, elapsed, self.log
        )

    async def _start(self) -> None:
        """Resolve the environment and start the process (`_process`), or record why it
        could not start as exit code 128, as a container runtime's StartError."""
        try:
            container = ctr.first_container(self._job)
            env = await self._resolve_env(container)
            argv = ctr.command_line(container, env)
            full = {**self._node.image_env, "HOSTNAME": self._pod_name, **env}
            full.update(self._node.forced_env)
            self._log_line(f"pod {self._pod_name}: {shlex.join(argv)}")
            # Shielded: a process started and then dropped by a cancellation would be orphaned.
            with anyio.CancelScope(shield=True):
                process = await self._node.spawn(argv, full, self.log)
        except (ctr.Unsupported, OSError) as exc:
            self._log_line(f"cannot start: {exc}")
            logger.error("%s: cannot start: %s", self.key, exc)
            self.code = START_ERROR_CODE
            return
        self._process = process
        logger.info("%s: started pid %d: %s", self.key, process.pid, _one_line(argv))

    async def _resolve_env(self, container: Json) -> dict[str, str]:
        """The container's environment; a missing Secret or ConfigMap is waited for."""
        pod = ctr.pod_stand_in(self._job, self._pod_name, self._node.name)
        reported = ""
        while True:
            try:
                return await ctr.container_env(container, pod, self._api, self.namespace)
            except ctr.Missing as exc:
                if str(exc) != reported:
                    reported = str(exc)
                    logger.info("%s: waiting: %s", self.key, exc)
                await self._node.clock.sleep(ENV_RETRY_SECONDS)

    def _log_line(self, text: str) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as out:
            out.write(f"--- captf executor: {text}\n")

    async def _supervise(self, process: Process) -> int:
        async with anyio.create_task_group() as group:

            async def stop_on_request() -> None:
                await self._stop_requested.wait()
                if self._stop is not None:
                    group.start_soon(self._write, self._stop)
                await terminate(process, self._grace(), self._node.clock)

            group.start_soon(stop_on_request)
            await self._write(Running())
            code = await process.wait()
            group.cancel_scope.cancel()
        return code

    async def _until_stopped(self, start: Callable[[], Awaitable[None]]) -> None:
        """`start()`, unless a stop request comes first."""
        async with anyio.create_task_group() as group:

            async def cancel_on_stop() -> None:
                await self._stop_requested.wait()
                group.cancel_scope.cancel()

            group.start_soon(cancel_on_stop)
            await start()
            group.cancel_scope.cancel()

    async def _enforce_deadline(self) -> None:
        seconds = self._job.get("spec", {}).get("activeDeadlineSeconds")
        if seconds is None:
            return
        await self._node.clock.sleep(float(seconds))
        self._request_stop(Stopping(Reason.DEADLINE))

    def _grace(self) -> float:
        spec = self._job.get("spec", {}).get("template", {}).get("spec", {})
        grace = spec.get("terminationGracePeriodSeconds")
        return DEFAULT_GRACE_SECONDS if grace is None else float(grace)

    async def _write(self, event: Event) -> Json | None:
        now: datetime = self._node.clock.now()

        def build(status: Json) -> Json | None:
            return next_status(status, event, now)

        return await self._api.update_status(self.namespace, self.name, self.uid, build)


def _disruption(job: Json, pod_name: str) -> Stopping:
    """PodFailurePolicy if a FailJob rule matches the DisruptionTarget condition; with no
    such rule the failed pod counts against backoffLimit, which runner Jobs set to 0."""
    policy = job.get("spec", {}).get("podFailurePolicy") or {}
    for index, rule in enumerate(policy.get("rules") or []):
        for cond in rule.get("onPodConditions") or []:
            if cond.get("type") != "DisruptionTarget" or cond.get("status", "True") != "True":
                continue
            if rule.get("action") != "FailJob":
                return Stopping(Reason.BACKOFF_LIMIT)
            namespace = job["metadata"]["namespace"]
            message = (
                f"Pod {namespace}/{pod_name} has condition DisruptionTarget "
                f"matching FailJob rule at index {index}"
            )
            return Stopping(Reason.POD_FAILURE_POLICY, message)
    return Stopping(Reason.BACKOFF_LIMIT)


def _one_line(argv: Sequence[str], limit: int = 160) -> str:
    text = shlex.join(argv).replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _verdict(status: Json | None) -> str:
    if status is None:
        return "no status written"
    for cond in status.get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return f"{cond['type']} ({cond.get('reason')})"
    return "unfinished"
