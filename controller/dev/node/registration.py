"""The Node object and its heartbeats, so the node-lifecycle controller sees a live node.

On start the Node is created (or its status taken over, after a restart) with a
Ready condition; then the Lease in `kube-node-lease` is renewed every 10 s and
the status (Ready, lastHeartbeatTime) written every minute, as a kubelet does.
A node that stops renewing is marked NotReady by kube-controller-manager after
its grace period, and its pods are evicted after their tolerations expire."""

from __future__ import annotations

import logging
import platform
from datetime import datetime
from typing import Any

from controller.core.basics.timefmt import format_time
from controller.dev.node.api import Requester
from controller.io.api import LEASES, NODES, resource_path
from runtime.clock import Clock
from runtime.errors import ApiError, is_transient
from runtime.transport import MERGE_PATCH

logger = logging.getLogger("controller.dev.node")

Json = dict[str, Any]

LEASE_SECONDS = 40
RENEW_SECONDS = 10.0
STATUS_SECONDS = 60.0
# Where node heartbeats live, as the kubelet keeps them.
NODE_LEASES = "kube-node-lease"
NODE_VERSION = "v1.35.4-captf-process-node"


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


def node_status(old: Json, name: str, host_ip: str, now: datetime) -> Json:
    """Ready, no pressure, capacity; lastTransitionTime kept while a status holds."""
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
            "kubeletVersion": NODE_VERSION,
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
    """Registers the Node, then `heartbeat()` keeps it alive until cancelled."""

    def __init__(self, transport: Requester, name: str, host_ip: str, clock: Clock) -> None:
        self._transport = transport
        self._name = name
        self._host_ip = host_ip
        self._clock = clock
        self._node_path = resource_path(NODES, None, name)
        self._lease_path = resource_path(LEASES, NODE_LEASES, name)
        #: The Node's spec.unschedulable as last read (a drain cordons it).
        self.unschedulable = False

    async def register(self) -> None:
        try:
            await self._transport.request(
                "POST", resource_path(NODES), body=node_object(self._name, self._host_ip)
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
        await self._write_status()
        await self._renew_lease()

    async def heartbeat(self) -> None:
        """Renew the Lease every 10 s and the status every minute; errors are logged and
        the beat goes on (an API server restart must not kill the node)."""
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
                if not is_transient(exc):
                    raise
                logger.warning("node heartbeat: %s", exc)

    async def refresh(self) -> None:
        node = await self._transport.request("GET", self._node_path)
        self.unschedulable = bool(node.get("spec", {}).get("unschedulable"))

    async def _write_status(self) -> None:
        node = await self._transport.request("GET", self._node_path)
        status = node_status(node.get("status") or {}, self._name, self._host_ip, self._clock.now())
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
