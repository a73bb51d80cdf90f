"""One container of a pod (or one of its init containers), run as a local process until
it ends for good.

    starting  -> its image pulled when it names a registry (a kubelet pulls it; the
                 pull policy and the pod's pull Secrets as for image volumes), and
                 image volumes pulled (Waiting ErrImagePull, then ImagePullBackOff,
                 while a pull fails; see imagevolumes); environment, volumes and
                 argv resolved; a missing Secret or ConfigMap is waited for
                 (Waiting CreateContainerConfigError), an image not in the table
                 waits as ErrImagePull; the process starts
    running   -> probes run: readiness sets `ready`, a liveness failure restarts it
    exited    -> Terminated with its exit code; restartPolicy Always (or OnFailure
                 after a non-zero exit) starts it again after the kubelet's
                 back-off (10 s doubling to 5 min, Waiting CrashLoopBackOff)
    stop()    -> SIGTERM, the grace period, SIGKILL; never restarted

An init container restarts after a non-zero exit unless restartPolicy is Never, and
never after 0; it has no probes.

A pulled image that is in the node's table runs the table's program (the pull checks
only that it can be had). One that is not runs its `command` (else its entrypoint)
from its root filesystem: an absolute path in `command`, `args` or `workingDir` that
lies under no mount is rewritten into the pulled image's root in the cache. The
program must run on this machine as it is (a static binary, such as the copier a
module image Job's copy shape puts into an emptyDir and runs from the module image).

Every change of state calls `changed()`, so the pod writes its status."""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import anyio

from controller.dev.node import env as envs
from controller.dev.node import termination
from controller.dev.node.images import Image, ImageTable, UnknownImage
from controller.dev.node.imagevolumes import ImageVolumes
from controller.dev.node.podstatus import (
    START_ERROR_CODE,
    ContainerView,
    Running,
    Terminated,
    Waiting,
)
from controller.dev.node.probes import ProbeSpec, check_of, run_probe
from controller.dev.node.process import Process, terminate
from controller.dev.node.pull import Puller, PullFailed
from controller.dev.node.pullsecrets import pull_credentials
from controller.dev.node.reference import names_registry
from controller.dev.node.volumes import Mounts, container_mounts, image_volumes
from runtime.clock import Clock
from runtime.incluster import SERVICE_ACCOUNT_DIR_ENV
from runtime.jsonobj import Json

logger = logging.getLogger("controller.dev.node")


# How often a missing Secret or ConfigMap is looked for again (the kubelet's pod sync).
CONFIG_RETRY_SECONDS = 2.0
BACKOFF_START_SECONDS = 10.0
BACKOFF_CAP_SECONDS = 300.0


class Spawner(Protocol):
    async def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path | None = None
    ) -> Process: ...


@dataclass(frozen=True)
class Setting:
    """What a container gets from its pod and node besides its own spec."""

    pod: Json
    reader: envs.ObjectReader
    images: ImageTable
    spawn: Spawner
    clock: Clock
    # Below the container's own variables: the host's basics and the node's (HOSTNAME,
    # HOME, KUBERNETES_SERVICE_HOST/PORT).
    base_env: Mapping[str, str]
    volumes: Mapping[str, Path]
    workdir: Path
    log: Path
    # Where the containers' termination message files lie (controller/dev/node/termination.py).
    messages: Path
    puller: Puller
    # Where the pod's imagePullSecrets are merged into a Docker config for crane.
    pull_auth: Path


CREATING = Waiting("ContainerCreating")
# The key of a container's own image beside its image volumes (no volume is named "").
OWN_IMAGE = ""


class ContainerRun:
    def __init__(
        self,
        spec: Json,
        setting: Setting,
        changed: Callable[[], None],
        *,
        init: bool = False,
        waiting: Waiting = CREATING,
    ) -> None:
        """`init`: an init container; `waiting`: its state until it starts."""
        self.spec = spec
        self.name = str(spec["name"])
        self._setting = setting
        self._changed = changed
        self._init = init
        self.view = ContainerView(self.name, str(spec.get("image", "")), waiting, ready=False)
        self._stopping = anyio.Event()
        self._grace = 30.0
        self._process: Process | None = None
        self._message: Path | None = None  # this start's termination message file
        sources = image_volumes(setting.pod, spec)
        if pulls_own_image(self.view.image):
            sources[OWN_IMAGE] = {
                "reference": self.view.image,
                "pullPolicy": spec.get("imagePullPolicy"),
            }
        self._images = ImageVolumes(
            sources,
            setting.puller,
            setting.clock,
            self._waiting,
            self._pull_credentials,
        )

    def stop(self, grace: float) -> None:
        """Stop for good: SIGTERM now if it runs, SIGKILL after `grace` seconds."""
        if not self._stopping.is_set():
            self._grace = grace
            self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def succeeded(self) -> bool:
        """It exited 0 and will not run again (what lets the next init container start)."""
        state = self.view.state
        return isinstance(state, Terminated) and state.exit_code == 0

    async def run(self) -> None:
        """Until it has ended and will not restart, or was stopped."""
        backoff = BACKOFF_START_SECONDS
        while not self.stopping:
            process, started = await self._start()
            if process is None:
                return
            code = await self._supervise(process, started)
            restart = self._restarts(code) and not self.stopping
            self._set(self.view.state, will_restart=restart)
            if not restart:
                return
            last = self.view.state
            assert isinstance(last, Terminated)
            self._set(
                Waiting("CrashLoopBackOff", f"back-off {backoff:.0f}s restarting failed container"),
                last_state=last,
                restart_count=self.view.restart_count + 1,
            )
            await self._until_stopped(self._setting.clock.sleep(backoff))
            backoff = min(backoff * 2, BACKOFF_CAP_SECONDS)

    async def _start(self) -> tuple[Process | None, datetime]:
        """The started process, or None when stopped before it could start."""
        setting = self._setting
        while not self.stopping:
            try:
                argv, env, cwd = await self._resolve()
                _log_line(setting.log, f"{self.name}: {shlex.join(argv)}")
                started = setting.clock.now()
                # Shielded: a process started and then dropped by a cancellation would be lost.
                with anyio.CancelScope(shield=True):
                    process = await setting.spawn(argv, env, setting.log, cwd)
            except envs.Missing as exc:
                await self._wait_config("CreateContainerConfigError", str(exc))
                continue
            except UnknownImage as exc:
                await self._wait_config("ErrImagePull", str(exc))
                continue
            except PullFailed as exc:
                _log_line(setting.log, f"{self.name}: {exc}")
                await self._until_stopped(self._images.back_off(exc))
                continue
            except (envs.Unsupported, OSError, ValueError) as exc:
                now = setting.clock.now()
                _log_line(setting.log, f"{self.name}: cannot start: {exc}")
                self._set(Terminated(START_ERROR_CODE, now, now, "StartError", str(exc)))
                return None, now
            self._process = process
            self._set(Running(started), process_id=process.pid)
            return process, started
        return None, setting.clock.now()

    async def _wait_config(self, reason: str, message: str) -> None:
        if self.view.state != Waiting(reason, message):
            logger.info("%s: waiting: %s", self.name, message)
            self._set(Waiting(reason, message))
        await self._until_stopped(self._setting.clock.sleep(CONFIG_RETRY_SECONDS))

    async def _resolve(self) -> tuple[list[str], dict[str, str], Path]:
        setting = self._setting
        pulled = await self._images.paths()
        root = pulled.pop(OWN_IMAGE, None)
        image = _table_entry(setting.images, self.view.image, pulled_root=root)
        # A program from a pulled image finds its own files under the image's root.
        own_root = root if image is None else None
        mounts = container_mounts(self.spec, {**setting.volumes, **pulled})
        # Mapped as a mount is: a value naming the message path names this start's file.
        self._message = termination.fresh_file(setting.messages, self.name)
        mounts = Mounts(
            {**mounts.paths, termination.message_path(self.spec): self._message}, own_root
        )
        own = await envs.container_env(self.spec, setting.pod, setting.reader)
        placed = mounts.env()
        # Only the pod's own values speak of container paths: the node's are real paths
        # already (and may well lie under /tmp themselves).
        own = {k: mounts.rewrite(v) for k, v in own.items()}
        env = {**(image.env if image else {}), **setting.base_env, **placed, **own}
        # Where the ServiceAccount's token lies is the node's to say, never the pod's.
        if SERVICE_ACCOUNT_DIR_ENV in placed:
            env[SERVICE_ACCOUNT_DIR_ENV] = placed[SERVICE_ACCOUNT_DIR_ENV]
        command = [_rewritten(part, env, mounts) for part in self.spec.get("command") or []]
        args = [_rewritten(part, env, mounts) for part in self.spec.get("args") or []]
        if image is not None:
            argv = setting.images.command_line(self.view.image, command, args)
        else:
            argv = [*(command or _entrypoint(root, mounts)), *args]
        working = self.spec.get("workingDir")
        cwd = Path(mounts.rewrite(str(working))) if working else setting.workdir
        return argv, env, cwd

    async def _supervise(self, process: Process, started: datetime) -> int:
        reason = ""
        async with anyio.create_task_group() as group:

            async def stop_on_request() -> None:
                await self._stopping.wait()
                await terminate(process, self._grace, self._setting.clock)

            def on_live(ok: bool) -> None:
                nonlocal reason
                if not ok and not reason:
                    reason = "liveness probe failed"
                    _log_line(self._setting.log, f"{self.name}: {reason}; restarting")
                    group.start_soon(terminate, process, self._grace, self._setting.clock)

            group.start_soon(stop_on_request)
            if not self._init:  # init containers have no probes and are never ready
                self._start_probes(group, on_live)
            code = await process.wait()
            group.cancel_scope.cancel()
        self._process = None
        now = self._setting.clock.now()
        _log_line(self._setting.log, f"{self.name}: exited with {code}")
        written = termination.read_message(self._message) if self._message else ""
        self._set(Terminated(code, started, now, message=written or reason), ready=False)
        return code

    def _start_probes(self, group: Any, on_live: Callable[[bool], None]) -> None:
        pod_ip = str((self._setting.pod.get("status") or {}).get("podIP") or "127.0.0.1")
        clock = self._setting.clock
        readiness = self.spec.get("readinessProbe")
        if readiness:
            check = check_of(readiness, self.spec, pod_ip)
            group.start_soon(run_probe, ProbeSpec.of(readiness), check, clock, self._on_ready)
        else:
            self._set(self.view.state, ready=True)
        liveness = self.spec.get("livenessProbe")
        if liveness:
            check = check_of(liveness, self.spec, pod_ip)
            group.start_soon(run_probe, ProbeSpec.of(liveness), check, clock, on_live)

    def _on_ready(self, ok: bool) -> None:
        if ok != self.view.ready and isinstance(self.view.state, Running):
            self._set(self.view.state, ready=ok)

    def _restarts(self, code: int) -> bool:
        policy = self._setting.pod.get("spec", {}).get("restartPolicy", "Always")
        if self._init:  # Always and OnFailure alike: until it exits 0
            return policy != "Never" and code != 0
        return policy == "Always" or (policy == "OnFailure" and code != 0)

    async def _until_stopped(self, waiting: Any) -> None:
        async with anyio.create_task_group() as group:

            async def cancel_on_stop() -> None:
                await self._stopping.wait()
                group.cancel_scope.cancel()

            group.start_soon(cancel_on_stop)
            await waiting
            group.cancel_scope.cancel()

    async def _pull_credentials(self) -> Path | None:
        setting = self._setting
        found = await pull_credentials(setting.pod, setting.reader, setting.pull_auth)
        for reason in found.skipped:
            _log_line(setting.log, f"{self.name}: {reason}")
        return found.docker_config

    def _waiting(self, state: Waiting) -> None:
        if self.view.state != state:
            self._set(state)

    def _set(self, state: Any, **changes: Any) -> None:
        self.view = replace(self.view, state=state, **changes)
        self._changed()


def pulls_own_image(image: str) -> bool:
    """Whether a container's image names a registry, so is pulled before it starts."""
    first, slash, _ = image.partition("/")
    return bool(slash) and names_registry(first)


def _table_entry(table: ImageTable, image: str, *, pulled_root: Path | None) -> Image | None:
    """The table's entry for `image`; None for a pulled image the table does not know
    (it runs from its root). UnknownImage when it is neither."""
    try:
        return table.resolve(image)
    except UnknownImage:
        if pulled_root is None:
            raise
        return None


def _entrypoint(root: Path | None, mounts: Mounts) -> list[str]:
    """A pulled image's Entrypoint and Cmd (its config), with paths into its root."""
    config = json.loads((root.parent / "config.json").read_text()) if root else {}
    inner = config.get("config") or {}
    argv = [*(inner.get("Entrypoint") or []), *(inner.get("Cmd") or [])]
    if not argv:
        raise envs.Unsupported("the image has no command and no entrypoint")
    return [mounts.rewrite(str(part)) for part in argv]


def _rewritten(part: str, env: Mapping[str, str], mounts: Mounts) -> str:
    return mounts.rewrite(envs.expand(str(part), env))


def _log_line(log: Path, text: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        out.write(f"--- captf node: {text}\n")
