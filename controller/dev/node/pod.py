"""One pod bound to this node, from its sandbox to its last status.

    sandbox    the pod's directory and volumes (tokens minted, Secrets read);
               status Pending with PodReadyToStartContainers
    init       the init containers, one at a time in order, each until it exits 0
               (restarted after a failure unless restartPolicy is Never); one
               that fails for good fails the pod, and no container starts
    containers all of them at once; each change of a container's state is
               written as pod status
    ended      every container ended and none restarts: phase Succeeded or
               Failed; the pod object stays, as a kubelet leaves it
    stop()     deleted or evicted (deletionTimestamp) or the node shutting down:
               every container gets SIGTERM, the grace period, SIGKILL; the
               final status is written, then a deleted pod is removed (grace 0)

Status writes are coalesced: a writer task writes the newest view whenever
something changed, so a burst of changes is one or two writes."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

import anyio

from controller.core.basics.timefmt import format_time
from controller.dev.node import env as envs
from controller.dev.node.container import CREATING, ContainerRun, Setting, Spawner
from controller.dev.node.images import ImageTable
from controller.dev.node.podstatus import (
    ContainerView,
    PodView,
    Waiting,
    pod_status,
)
from controller.dev.node.pull import Puller
from controller.dev.node.volumes import VolumeSource, fill_volumes, pod_root
from runtime.clock import Clock
from runtime.jsonobj import Json

logger = logging.getLogger("controller.dev.node")


# The containers' state while the init containers run, as a kubelet shows it.
INITIALIZING = Waiting("PodInitializing")
# The API's default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30.0


class PodApi(VolumeSource, Protocol):
    async def update_pod_status(
        self, namespace: str, name: str, uid: str, build: Callable[[Json], Json | None]
    ) -> Json | None: ...

    async def finish_delete(self, namespace: str, name: str, uid: str) -> None: ...


@dataclass(frozen=True)
class NodeSetting:
    """What every pod on the node shares."""

    name: str
    api: PodApi
    images: ImageTable
    spawn: Spawner
    clock: Clock
    pods_dir: Path
    log_dir: Path
    host_ip: str
    # KUBERNETES_SERVICE_HOST/PORT and the host's basics (PATH, LANG, ...).
    base_env: Mapping[str, str]
    # The image cache every pod's image volumes come from.
    puller: Puller


@dataclass(frozen=True)
class Shutdown:
    """Why the node stopped a pod that was not deleted: written as a kubelet does on a
    graceful node shutdown, with a DisruptionTarget condition."""

    reason: str = "Terminated"
    message: str = "Pod was terminated in response to imminent node shutdown."


class PodRun:
    def __init__(self, pod: Json, pod_ip: str, node: NodeSetting) -> None:
        meta = pod["metadata"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.uid: str = meta["uid"]
        self.pod_ip = pod_ip
        self._node = node
        self._pod = _with_addresses(pod, pod_ip, node.host_ip)
        self._root = pod_root(node.pods_dir, pod)
        spec = self._pod.get("spec", {})
        self.log = node.log_dir / self.namespace / f"{self.name}.log"
        self._containers: list[ContainerRun] = []
        self._init_containers: list[ContainerRun] = []
        self._container_specs: list[Json] = list(spec.get("containers") or [])
        self._init_specs: list[Json] = list(spec.get("initContainers") or [])
        self._changed = anyio.Event()
        self._started_at: datetime = node.clock.now()
        self._stopped = False
        self._shutdown: Shutdown | None = None
        self._deleted = False
        self._gone = False
        self._sandbox = False
        self.done = anyio.Event()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def delete(self, grace: float | None) -> None:
        """The pod is being deleted: stop its containers within `grace` seconds."""
        self._deleted = True
        self._stop(self._grace() if grace is None else grace)

    def gone(self) -> None:
        """The pod object no longer exists: stop at once, write nothing."""
        self._gone = True
        self._stop(0.0)

    def shut_down(self) -> None:
        """The node is stopping: stop the containers and say so in the pod's status."""
        if not self._stopped:
            self._shutdown = Shutdown()
        self._stop(self._grace())

    def _stop(self, grace: float) -> None:
        self._stopped = True
        for container in [*self._init_containers, *self._containers]:
            container.stop(grace)
        self._notify()

    async def run(self) -> None:
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._write_changes)
                await self._run_containers()
                group.cancel_scope.cancel()
            await self._finish()
        finally:
            self.done.set()

    async def _run_containers(self) -> None:
        volumes = await self._sandbox_volumes()
        if volumes is None:
            return
        setting = Setting(
            pod=self._pod,
            reader=self._node.api,
            images=self._node.images,
            spawn=self._node.spawn,
            clock=self._node.clock,
            base_env={
                **self._node.base_env,
                "HOSTNAME": self.name,
                "HOME": str(self._root / "home"),
            },
            volumes=volumes,
            workdir=self._root / "home",
            log=self.log,
            messages=self._root / "t",
            puller=self._node.puller,
            pull_auth=self._root / "pull-auth",
        )
        (self._root / "home").mkdir(parents=True, exist_ok=True)
        self._init_containers = [
            ContainerRun(c, setting, self._notify, init=True) for c in self._init_specs
        ]
        waiting = INITIALIZING if self._init_specs else CREATING
        self._containers = [
            ContainerRun(c, setting, self._notify, waiting=waiting) for c in self._container_specs
        ]
        # Emptydirs are the pod's (`setting.volumes`): what an init container writes there,
        # the next ones and the containers find.
        for init in self._init_containers:
            if self._stopped:
                return
            await init.run()
            if not init.succeeded:
                return  # failed for good, or stopped: no container starts
        if self._stopped:
            return
        async with anyio.create_task_group() as group:
            for container in self._containers:
                group.start_soon(container.run)

    async def _sandbox_volumes(self) -> dict[str, Path] | None:
        """The pod's volumes, retried while a Secret or ConfigMap is missing; None when
        the pod was stopped first or cannot run here."""
        reported = ""
        while not self._stopped:
            try:
                volumes = await fill_volumes(self._pod, self._root, self._node.api)
            except (envs.Missing, LookupError) as exc:
                if str(exc) != reported:
                    reported = str(exc)
                    logger.info("%s: waiting for a volume: %s", self.key, exc)
                await self._node.clock.sleep(2.0)
                continue
            except (envs.Unsupported, OSError) as exc:
                logger.error("%s: cannot set up the pod: %s", self.key, exc)
                return None
            self._sandbox = True
            self._notify()
            return volumes
        return None

    async def _write_changes(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            await self._write()

    async def _finish(self) -> None:
        if self._gone:
            self._cleanup()
            return
        await self._write()
        if self._deleted:
            await self._node.api.finish_delete(self.namespace, self.name, self.uid)
            self._cleanup()
        logger.info("%s: %s", self.key, self._summary())

    def _cleanup(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    def _notify(self) -> None:
        self._changed.set()

    def view(self) -> PodView:
        extra: tuple[Json, ...] = ()
        if self._shutdown is not None:
            now = self._node.clock.now()
            extra = (_disruption(self._shutdown, now),)
        return PodView(
            containers=tuple(c.view for c in self._containers) or _never_started(self._pod),
            init_containers=tuple(c.view for c in self._init_containers)
            or _never_started(self._pod, "initContainers"),
            pod_ip=self.pod_ip,
            host_ip=self._node.host_ip,
            started_at=self._started_at,
            sandbox_ready=self._sandbox,
            stopped=self._stopped,
            reason=self._shutdown.reason if self._shutdown else "",
            message=self._shutdown.message if self._shutdown else "",
            extra_conditions=extra,
        )

    async def _write(self) -> Json | None:
        view = self.view()
        now = self._node.clock.now()

        def build(pod: Json) -> Json | None:
            return pod_status(pod, view, now)

        return await self._node.api.update_pod_status(self.namespace, self.name, self.uid, build)

    def _grace(self) -> float:
        grace = self._pod.get("spec", {}).get("terminationGracePeriodSeconds")
        return DEFAULT_GRACE_SECONDS if grace is None else float(grace)

    def _summary(self) -> str:
        parts = []
        for c in [*self._init_containers, *self._containers]:
            state = c.view.state
            parts.append(
                f"{c.name} {type(state).__name__.lower()} {getattr(state, 'exit_code', '')}"
            )
        return ", ".join(parts) or "never started"


def _with_addresses(pod: Json, pod_ip: str, host_ip: str) -> Json:
    """The pod as its containers see it through the downward API."""
    status = dict(pod.get("status") or {})
    status.update(podIP=pod_ip, hostIP=host_ip)
    return pod | {"status": status}


def _never_started(pod: Json, kind: str = "containers") -> tuple[ContainerView, ...]:
    return tuple(
        ContainerView(str(c["name"]), str(c.get("image", "")), CREATING)
        for c in pod.get("spec", {}).get(kind) or []
    )


def _disruption(shutdown: Shutdown, now: datetime) -> Json:
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "TerminationByKubelet",
        "message": shutdown.message,
        "lastTransitionTime": format_time(now),
    }
