"""The process node stops as a node drains: nothing starts once its stop has begun.

On the real control plane (kube-apiserver with kube-controller-manager): two
ReplicaSets of one pod each, one whose process exits at SIGTERM and one that lingers
after it. When the node stops, the first pod ends while the second still runs, and the
ReplicaSet controller makes a replacement at once, as it did for the controller's
Deployment on every Ctrl-C of `make run`. The replacement must be neither bound nor
started; the Node stays cordoned with the node's own mark, which its next start lifts,
and then the replacement runs."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from controller.dev.node import ProcessNode
from controller.dev.node.images import Image, ImageTable
from controller.dev.node.registration import CORDONED_BY_SHUTDOWN
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import Transport, open_transport
from tests.kube.harness import eventually

pytestmark = pytest.mark.kube

WAIT = 60.0
IMAGES = ImageTable({"python": Image("python", (sys.executable,))})
# Exits LINGER seconds after SIGTERM.
LINGERING = """
import os, signal, sys, time
def _term(*_):
    time.sleep(float(os.environ["LINGER"]))
    sys.exit(143)
signal.signal(signal.SIGTERM, _term)
time.sleep(600)
"""


def replica_set(name: str, linger: float) -> Json:
    labels = {"app": name}
    container = {
        "name": "main",
        "image": "python:3",
        "args": ["-c", LINGERING],
        "env": [{"name": "LINGER", "value": str(linger)}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 30, "containers": [container]},
            },
        },
    }


class Cluster:
    def __init__(self, transport: Transport, ns: str, tmp_path: Path) -> None:
        self.transport = transport
        self.ns = ns
        self.node_name = f"stop-{ns}"[:63]
        self.tmp_path = tmp_path

    def node(self) -> ProcessNode:
        return ProcessNode(
            self.transport,
            images=IMAGES,
            name=self.node_name,
            namespace=self.ns,
            log_dir=self.tmp_path / "logs",
            pods_dir=self.tmp_path / "pods",
        )

    async def pods(self, app: str) -> list[Json]:
        listed = await self.transport.request(
            "GET", f"/api/v1/namespaces/{self.ns}/pods", params={"labelSelector": f"app={app}"}
        )
        items: list[Json] = listed.get("items") or []
        return items

    async def running(self, app: str) -> Json | None:
        for pod in await self.pods(app):
            if (pod.get("status") or {}).get("phase") == "Running":
                return pod
        return None


@pytest_asyncio.fixture(loop_scope="function")
async def c(cluster: ApiServer, cluster_namespace: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with open_transport(str(cluster.kubeconfig)) as transport:
        yield Cluster(transport, cluster_namespace, tmp_path)


async def test_nothing_starts_once_the_node_has_begun_to_stop(c: Cluster) -> None:
    base = f"/apis/apps/v1/namespaces/{c.ns}/replicasets"
    await c.transport.request("POST", base, body=replica_set("quick", 0))
    await c.transport.request("POST", base, body=replica_set("slow", 6))
    async with c.node():
        first = await eventually(lambda: c.running("quick"), within=WAIT, what="quick runs")
        await eventually(lambda: c.running("slow"), within=WAIT, what="slow runs")

    # The node's block has ended: both pods were stopped, the slow one over 6 s, while
    # the ReplicaSet controller replaced the quick one.
    async def replacement() -> Json | None:
        others = [
            p for p in await c.pods("quick") if p["metadata"]["uid"] != first["metadata"]["uid"]
        ]
        return others[0] if others else None

    later = await eventually(replacement, within=WAIT, what="the quick pod's replacement")
    assert not later["spec"].get("nodeName"), "bound after the node began to stop"
    assert (later.get("status") or {}).get("phase") == "Pending"
    assert not (later.get("status") or {}).get("containerStatuses")
    node = await c.transport.request("GET", f"/api/v1/nodes/{c.node_name}")
    assert node["spec"].get("unschedulable") is True
    assert node["metadata"]["annotations"][CORDONED_BY_SHUTDOWN] == "true"

    # Started again, the node lifts its own cordon and runs what waited.
    async with c.node():
        await eventually(lambda: c.running("quick"), within=WAIT, what="the replacement runs")
        node = await c.transport.request("GET", f"/api/v1/nodes/{c.node_name}")
        assert not node["spec"].get("unschedulable")
        assert CORDONED_BY_SHUTDOWN not in (node["metadata"].get("annotations") or {})
