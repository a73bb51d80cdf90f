"""The Node object and its heartbeats, so the node-lifecycle controller sees a live node.

On start the Node is created (or its status taken over, after a restart) with a
Ready condition; then the Lease in `kube-node-lease` is renewed every 10 s and
the status (Ready, lastHeartbeatTime) written every minute, as a kubelet does.
A node that stops renewing is marked NotReady by kube-controller-manager after
its grace period, and its pods are evicted after their tolerations expire.

A Node deleted by anyone (Cluster API deletes the Node of a Machine it removes) is
registered again only while its machine still exists (`wanted`), as a kubelet whose
Node is gone re-registers while it runs; otherwise the heartbeat ends quietly and takes
its Lease with it. A node that stops cordons its Node first (`cordon`) and marks the
cordon as its own, so its next registration lifts that cordon and no one else's."""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable
from datetime import datetime

from controller.core.basics.timefmt import format_time
from controller.dev.node.api import Requester
from controller.dev.node.drain import cordon as cordon_node
from controller.io.api import LEASES, NODES, resource_path
from runtime.clock import Clock
from runtime.errors import ApiError, is_not_found, is_transient
from runtime.jsonobj import Json
from runtime.transport import MERGE_PATCH

logger = logging.getLogger("controller.dev.node")


LEASE_SECONDS = 40
RENEW_SECONDS = 10.0
STATUS_SECONDS = 60.0
# Where node heartbeats live, as the kubelet keeps them.
NODE_LEASES = "kube-node-lease"
# The process node's own kubelet version: it is no kubelet of any release. A stand-in
# Node reports the version its machine asks for instead (Registration's `version`).
NODE_VERSION = "v1.35.4-captf-process-node"
# On a Node this node cordoned as it stopped: its next start lifts the cordon.
CORDONED_BY_SHUTDOWN = "node.captf.io/cordoned-by-shutdown"


def node_object(name: str, host_ip: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": _arch(),
                "node.captf.io/process-node": "true",
            },
        },
        "spec": {},
        "status": {"addresses": [{"type": "InternalIP", "address": host_ip}]},
    }


def node_status(
    old: Json, name: str, host_ip: str, now: datetime, version: str = NODE_VERSION
) -> Json:
    """Ready, no pressure, capacity, `version` as the kubelet's; lastTransitionTime kept
    while a status holds."""
    stamp = format_time(now)
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    wanted = {
        "MemoryPressure": ("False", "KubeletHasSufficientMemory"),
        "DiskPressure": ("False", "KubeletHasNoDiskPressure"),
        "PIDPressure": ("False", "KubeletHasSufficientPID"),
        "Ready": ("True", "KubeletReady"),
    }
    conditions = []
    for kind, (status, reason) in wanted.items():
        before = previous.get(kind) or {}
        since = before.get("lastTransitionTime") if before.get("status") == status else None
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": "process node is posting ready status" if kind == "Ready" else "",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": since or stamp,
            }
        )
    resources = {"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "20Gi"}
    return {
        **old,
        "conditions": conditions,
        "addresses": [
            {"type": "InternalIP", "address": host_ip},
            {"type": "Hostname", "address": name},
        ],
        "capacity": resources,
        "allocatable": resources,
        "nodeInfo": {
            "kubeletVersion": version,
            "kubeProxyVersion": "",
            "containerRuntimeVersion": "process://local",
            "operatingSystem": "linux",
            "architecture": _arch(),
            "osImage": platform.platform(),
            "kernelVersion": platform.release(),
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }


def lease_object(name: str, now: datetime) -> Json:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": NODE_LEASES},
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": _micro(now),
        },
    }


class Registration:
    """Registers the Node, then `heartbeat()` keeps it alive until cancelled, or until
    the Node is deleted while `wanted()` says its machine is gone."""

    def __init__(
        self,
        transport: Requester,
        name: str,
        host_ip: str,
        clock: Clock,
        *,
        wanted: Callable[[], bool] = lambda: True,
        body: Json | None = None,
        version: str = NODE_VERSION,
    ) -> None:
        """`wanted`: whether the machine behind the Node still exists, asked when the
        Node is found deleted (default: always, as for the process node itself). `body`:
        the Node as created, also when registered again (default: node_object's).
        `version`: the kubelet version the status reports, fixed for the Node's life as a
        kubelet binary's is."""
        self._transport = transport
        self._name = name
        self._host_ip = host_ip
        self._clock = clock
        self._wanted = wanted
        self._body = body or node_object(name, host_ip)
        self._version = version
        self._node_path = resource_path(NODES, None, name)
        self._lease_path = resource_path(LEASES, NODE_LEASES, name)
        #: The Node's spec.unschedulable as last read (a drain cordons it).
        self.unschedulable = False

    async def register(self) -> None:
        try:
            await self._transport.request("POST", resource_path(NODES), body=self._body)
        except ApiError as exc:
            if exc.status != 409:
                raise
        await self._lift_own_cordon()
        await self._write_status()
        await self._renew_lease()

    async def heartbeat(self) -> None:
        """Renew the Lease every 10 s and the status every minute; transient errors are
        logged and the beat goes on (an API server restart must not kill the node). Ends
        when the Node is gone and its machine with it."""
        since_status = 0.0
        while True:
            await self._clock.sleep(RENEW_SECONDS)
            since_status += RENEW_SECONDS
            try:
                await self._renew_lease()
                if since_status >= STATUS_SECONDS:
                    since_status = 0.0
                    await self._write_status()
                else:
                    await self.refresh()
            except Exception as exc:
                if self._node_gone(exc):
                    if not await self._node_deleted():
                        return
                elif is_transient(exc):
                    logger.warning("node heartbeat: %s", exc)
                else:
                    raise

    def _node_gone(self, exc: Exception) -> bool:
        return is_not_found(exc, group=NODES.group, plural=NODES.plural, name=self._name)

    async def _node_deleted(self) -> bool:
        """The Node was deleted: registered again while its machine exists (True: the
        beat goes on); else its Lease deleted, and False."""
        if self._wanted():
            logger.info("node %s: its Node was deleted; registering it again", self._name)
            await self.register()
            return True
        logger.info("node %s: its Node was deleted and its machine is gone; stopping", self._name)
        try:
            await self._transport.request("DELETE", self._lease_path)
        except ApiError as exc:
            if exc.status != 404:
                logger.warning("node %s: its Lease stays: %s", self._name, exc)
        return False

    async def cordon(self) -> None:
        """Marks the Node unschedulable, as its own cordon (lifted at the next register)."""
        own: dict[str, str | None] = {CORDONED_BY_SHUTDOWN: "true"}
        await cordon_node(self._transport, self._name, annotations=own)
        self.unschedulable = True

    async def _lift_own_cordon(self) -> None:
        """A cordon this node set as it stopped is lifted; anyone else's stays."""
        node = await self._transport.request("GET", self._node_path)
        if not (node.get("metadata", {}).get("annotations") or {}).get(CORDONED_BY_SHUTDOWN):
            return
        lifted: dict[str, str | None] = {CORDONED_BY_SHUTDOWN: None}
        await cordon_node(self._transport, self._name, unschedulable=False, annotations=lifted)

    async def refresh(self) -> None:
        node = await self._transport.request("GET", self._node_path)
        self.unschedulable = bool(node.get("spec", {}).get("unschedulable"))

    async def _write_status(self) -> None:
        node = await self._transport.request("GET", self._node_path)
        old = node.get("status") or {}
        status = node_status(old, self._name, self._host_ip, self._clock.now(), self._version)
        # A merge patch without a resourceVersion: the node-lifecycle controller writes the
        # same object (taints), and our fields are ours alone.
        written = await self._transport.request(
            "PATCH",
            resource_path(NODES, None, self._name, sub="status"),
            body={"status": status},
            content_type=MERGE_PATCH,
        )
        self.unschedulable = bool(written.get("spec", {}).get("unschedulable"))

    async def _renew_lease(self) -> None:
        lease = lease_object(self._name, self._clock.now())
        try:
            current = await self._transport.request("GET", self._lease_path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            await self._transport.request("POST", resource_path(LEASES, NODE_LEASES), body=lease)
            return
        current["spec"] = {**current.get("spec", {}), **lease["spec"]}
        await self._transport.request("PUT", self._lease_path, body=current)


def _micro(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
