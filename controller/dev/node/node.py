"""The process node: a Node in the cluster whose pods are local processes.

    async with open_transport(kubeconfig) as transport:
        async with ProcessNode(transport, name="local", images=table) as node:
            ...

It registers the Node and keeps its Lease fresh (`registration`), binds every
pending pod that no one scheduled to itself (there is no scheduler: this node
is the cluster's only place to run), and runs each pod bound to it (`pod`).
With `namespace` it sees only that namespace's pods, so several nodes can
share one API server (one per test).

A pod is run at most once by a node process (by uid). A pod bound to this node
that already ran under an earlier node process cannot be found again (its
processes died with that node): with restartPolicy Never it is failed as a
kubelet fails a container it cannot locate (ContainerStatusUnknown, exit 137);
otherwise it is started again.

It stops as a node drains: cordoned, so nothing more is bound to it, and admitting no
pod, so neither a pod bound meanwhile nor the replacement a ReplicaSet makes for a pod
it stops is started; then its pods are stopped. Whoever runs it stops the control plane
after that."""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import anyio
from anyio.abc import TaskGroup

from controller.dev.node.api import NodeApi, Requester
from controller.dev.node.container import Spawner
from controller.dev.node.images import ImageTable
from controller.dev.node.pod import NodeSetting, PodRun
from controller.dev.node.podstatus import ContainerView, PodView, Terminated, pod_status
from controller.dev.node.process import spawn
from controller.dev.node.pull import Puller
from controller.dev.node.registration import Registration
from controller.dev.node.volumes import pod_root
from controller.io.api import PODS
from runtime.cache import Informer, Selection
from runtime.cache.reflector import ListWatchTransport
from runtime.clock import Clock, LoopClock
from runtime.jsonobj import Json
from runtime.lifecycle import RunsInContext
from runtime.supervise import supervised

logger = logging.getLogger("controller.dev.node")


DEFAULT_NAME = "local"
HOST_IP = "127.0.0.1"
# Passed from the node's environment to every process: what a local interpreter needs
# to work at all. HOME, TMPDIR and KUBECONFIG are deliberately not among them.
HOST_ENV = ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV")
# Pod IPs: one loopback address each, so two pods may listen on the same port.
POD_NETWORK = ipaddress.ip_network("127.1.0.0/16")
UNKNOWN_EXIT = 137


class NodeTransport(Requester, ListWatchTransport, Protocol):
    """Requests and watches: `runtime.transport.Transport`."""

    @property
    def host(self) -> str: ...


class ProcessNode(RunsInContext):
    def __init__(
        self,
        transport: NodeTransport,
        *,
        images: ImageTable,
        name: str = DEFAULT_NAME,
        namespace: str | None = None,
        log_dir: str | os.PathLike[str],
        pods_dir: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
        spawner: Spawner = spawn,
        crane: Path | None = None,
        images_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """`log_dir`: each pod's output in `<log_dir>/<namespace>/<pod>.log`. `pods_dir`:
        the pods' own directories (volumes, tokens, HOME); default `<log_dir>/../pods`.
        `crane`: what image volumes are pulled with (hack/registry's build; without it
        every pull fails, saying so). `images_dir`: the image cache, default
        `<log_dir>/../images`."""
        self._transport = transport
        self._images = images
        self.name = name
        self._namespace = namespace
        self._log_dir = Path(log_dir).absolute()
        self._pods_dir = Path(pods_dir).absolute() if pods_dir else self._log_dir.parent / "pods"
        self._clock = clock or LoopClock()
        self._spawn = spawner
        cache = Path(images_dir).absolute() if images_dir else self._log_dir.parent / "images"
        self._puller = Puller(cache, crane)
        self._api = NodeApi(transport, self._clock)
        self._registration = Registration(transport, name, HOST_IP, self._clock)
        self._runs: dict[str, PodRun] = {}
        # Every uid this node process ran or settled: never run again.
        self._seen: set[str] = set()
        self._binding: set[str] = set()
        self._next_ip = 0
        self._tasks: TaskGroup | None = None
        self._setting: NodeSetting | None = None
        # Set once the node begins to stop: from then on it binds and starts nothing.
        self._stopping = False

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ProcessNode]:
        """Register, bind and run until the block exits; then stop every pod as a graceful
        node shutdown does and return when all are gone."""
        self._setting = NodeSetting(
            name=self.name,
            api=self._api,
            images=self._images,
            spawn=self._spawn,
            clock=self._clock,
            pods_dir=self._pods_dir,
            log_dir=self._log_dir,
            host_ip=HOST_IP,
            base_env={**_host_env(), **_service_env(self._transport.host)},
            puller=self._puller,
        )
        await self._registration.register()
        ours = Informer(
            self._transport, PODS, clock=self._clock, selection=self._selection(self.name)
        )
        ours.add_handler(self._on_ours)
        pending = Informer(self._transport, PODS, clock=self._clock, selection=self._selection(""))
        pending.add_handler(self._on_pending)
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            heartbeat = f"node {self.name}: heartbeat"
            tasks.start_soon(supervised, heartbeat, self._registration.heartbeat, self._clock)
            try:
                async with ours, pending:
                    await ours.wait_synced()
                    await pending.wait_synced()
                    yield self
                    await self._shut_down()
            finally:
                tasks.cancel_scope.cancel()
                self._tasks = None

    def _selection(self, node: str) -> Selection:
        return Selection(namespace=self._namespace, field_selector=f"spec.nodeName={node}")

    async def _shut_down(self) -> None:
        """As a node drains. Admission ends first, in this process, as the stop begins
        (the cordon is a write that takes a while); then the cordon, which the next start
        of this node lifts; then the pods."""
        self._stopping = True
        try:
            await self._registration.cordon()
        except Exception:
            logger.exception("node %s: could not cordon its Node; stopping anyway", self.name)
        runs = list(self._runs.values())
        for run in runs:
            run.shut_down()
        for run in runs:
            await run.done.wait()

    # -- scheduling ---------------------------------------------------------------

    def _on_pending(self, old: Json | None, new: Json | None) -> None:
        if new is None or new["metadata"].get("deletionTimestamp") or self._stopping:
            return
        uid = new["metadata"]["uid"]
        if uid in self._binding or (new.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        self._binding.add(uid)
        assert self._tasks is not None, "changes arrive only while running"
        self._tasks.start_soon(self._bind, new)

    async def _bind(self, pod: Json) -> None:
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        try:
            await self._registration.refresh()
            if self._stopping or self._registration.unschedulable:
                logger.info("%s: not bound: node %s is cordoned", key, self.name)
                return
            if await self._api.bind(pod, self.name):
                logger.info("%s: bound to %s", key, self.name)
        except Exception:
            logger.exception("%s: binding failed", key)
        finally:
            self._binding.discard(pod["metadata"]["uid"])

    # -- running ------------------------------------------------------------------

    def _on_ours(self, old: Json | None, new: Json | None) -> None:
        if new is None:
            if old is None:
                return
            run = self._runs.get(old["metadata"]["uid"])
            if run is not None:
                run.gone()
            else:
                # An ended pod is removed at once by the API server (its grace is 0): its
                # directory, tokens included, goes with it.
                shutil.rmtree(pod_root(self._pods_dir, old), ignore_errors=True)
            return
        meta = new["metadata"]
        uid = meta["uid"]
        deleting = meta.get("deletionTimestamp") is not None
        run = self._runs.get(uid)
        if run is not None:
            if deleting:
                run.delete(_float(meta.get("deletionGracePeriodSeconds")))
            return
        if uid in self._seen:
            return
        self._seen.add(uid)
        assert self._tasks is not None, "changes arrive only while running"
        phase = (new.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            if deleting:
                self._tasks.start_soon(self._finish_delete, new)
            return
        if self._stopping:
            logger.info("%s/%s: not admitted: node %s is stopping", *_where(meta), self.name)
            return
        if _ran_before(new) and new["spec"].get("restartPolicy") == "Never":
            self._tasks.start_soon(self._fail_unknown, new)
            return
        run = PodRun(new, self._pod_ip(), self._setting_or_fail())
        self._runs[uid] = run
        if deleting:
            run.delete(_float(meta.get("deletionGracePeriodSeconds")))
        self._tasks.start_soon(self._run, run)

    async def _run(self, run: PodRun) -> None:
        logger.info("%s: starting on %s as %s", run.key, self.name, run.pod_ip)
        try:
            await run.run()
        except Exception:
            # One pod's trouble (a rejected status, an API error) is that pod's.
            logger.exception("%s: node error", run.key)
        finally:
            self._runs.pop(run.uid, None)

    async def _finish_delete(self, pod: Json) -> None:
        meta = pod["metadata"]
        try:
            await self._api.finish_delete(meta["namespace"], meta["name"], meta["uid"])
        except Exception:
            logger.exception("%s/%s: delete failed", meta["namespace"], meta["name"])

    async def _fail_unknown(self, pod: Json) -> None:
        """A pod that ran under an earlier node process: its containers are lost."""
        meta = pod["metadata"]
        now = self._clock.now()
        lost = Terminated(
            UNKNOWN_EXIT,
            None,
            now,
            "ContainerStatusUnknown",
            "The container could not be located when the pod was terminated",
        )
        containers = tuple(
            ContainerView(str(c["name"]), str(c.get("image", "")), lost)
            for c in pod["spec"].get("containers") or []
        )
        status = pod.get("status") or {}
        view = PodView(
            containers=containers,
            pod_ip=str(status.get("podIP") or HOST_IP),
            host_ip=HOST_IP,
            started_at=now,
            sandbox_ready=False,
            stopped=True,
        )
        try:
            await self._api.update_pod_status(
                meta["namespace"], meta["name"], meta["uid"], lambda p: pod_status(p, view, now)
            )
            if meta.get("deletionTimestamp"):
                await self._api.finish_delete(meta["namespace"], meta["name"], meta["uid"])
        except Exception:
            logger.exception("%s/%s: could not fail the lost pod", meta["namespace"], meta["name"])

    def _pod_ip(self) -> str:
        self._next_ip = self._next_ip % (POD_NETWORK.num_addresses - 2) + 1
        return str(POD_NETWORK[self._next_ip])

    def _setting_or_fail(self) -> NodeSetting:
        assert self._setting is not None, "pods run only while the node runs"
        return self._setting


def _where(meta: Json) -> tuple[str, str]:
    return str(meta.get("namespace")), str(meta.get("name"))


def _ran_before(pod: Json) -> bool:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        if "running" in state or "terminated" in state or status.get("restartCount"):
            return True
    return False


def _float(value: object) -> float | None:
    return None if value is None else float(str(value))


def _host_env() -> dict[str, str]:
    return {name: os.environ[name] for name in HOST_ENV if name in os.environ}


def _service_env(host: str) -> dict[str, str]:
    """Where in-cluster configuration finds the API server: its real address, not a
    Service IP (there is no service proxy)."""
    url = urlsplit(host)
    port = str(url.port or (443 if url.scheme == "https" else 80))
    return {
        "KUBERNETES_SERVICE_HOST": url.hostname or HOST_IP,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
    }
