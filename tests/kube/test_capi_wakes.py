"""Cluster API objects on the real API server, watched by the controller's caches and
handlers: a Machine's or Cluster's status writes (what Cluster API writes as each Machine
progresses) wake no CAPTF object and are not even cached; a change a pass reads (the
spec, an annotation, the Cluster's `status.initialization`) wakes the objects acting for
it. Each "no wake" is checked by a later change that does wake, on the same watch: the
events of one watch arrive in order, so nothing is waited for by time."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from controller.core.basics.names import CAPI_CLUSTER, CAPI_MACHINE, CLUSTER, MACHINE
from controller.io.caches import Caches
from controller.io.handlers import wire_handlers
from controller.io.keys import key_of
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.transport import Transport, open_transport
from tests.kube.harness import MERGE, Kube, eventually

pytestmark = pytest.mark.kube


@pytest_asyncio.fixture(loop_scope="function")
async def transport(apiserver: ApiServer) -> AsyncIterator[Transport]:
    async with open_transport(str(apiserver.kubeconfig)) as opened:
        yield opened


async def _machine(kube: Kube) -> None:
    body = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": MACHINE,
        "metadata": {"name": "m1"},
        "spec": {"source": {"configMapRef": {"name": "c1-module"}}, "jobs": {"image": "x"}},
    }
    await kube.create_member(body)


async def test_cluster_api_status_writes_wake_nothing_and_what_a_pass_reads_does(
    apiserver: ApiServer, namespace: str, transport: Transport
) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster()
    await _machine(kube)
    caches = Caches(transport, clock=LoopClock(), namespace=namespace)
    woken: list[str] = []
    wire_handlers(caches, woken.append)

    member, cluster = key_of(MACHINE, namespace, "m1"), key_of(CLUSTER, namespace, "c1")
    machine = kube.capi_path("machines", "m1")
    informers = [*caches.capi.values(), caches.objects[MACHINE], caches.objects[CLUSTER]]

    async def woke(key: str, times: int) -> None:
        async def enough() -> bool:
            return woken.count(key) >= times

        await eventually(enough, what=f"{key} woken {times} times")

    async with contextlib.AsyncExitStack() as stack:
        for informer in informers:
            await stack.enter_async_context(informer)
            await informer.wait_synced()
        woken.clear()

        # Cluster API's own status writes: no wake; then an annotation, which wakes.
        status = {"status": {"phase": "Provisioning", "conditions": _conditions()}}
        await kube.call("PATCH", machine + "/status", status, MERGE)
        await kube.call("PATCH", machine, {"metadata": {"annotations": {"a": "1"}}}, MERGE)
        await woke(member, 1)
        assert woken == [member]
        cached = caches.capi[CAPI_MACHINE].store.get(f"{namespace}/m1")
        assert cached is not None
        assert "status" not in cached  # not even cached

        # The Cluster's counters: no wake; its initialization: the TerraformCluster and
        # its member.
        woken.clear()
        path = kube.capi_path("clusters", "c1") + "/status"
        counters = {"status": {"phase": "Provisioned", "conditions": _conditions()}}
        await kube.call("PATCH", path, counters, MERGE)
        initialized = {"initialization": {"controlPlaneInitialized": True}}
        await kube.call("PATCH", path, {"status": initialized}, MERGE)
        await woke(member, 1)
        await woke(cluster, 1)
        assert sorted(woken) == sorted([member, cluster])
        assert caches.capi[CAPI_CLUSTER].store.get(f"{namespace}/c1") is not None


def _conditions() -> list[dict[str, str]]:
    return [
        {
            "type": "Available",
            "status": "False",
            "reason": "NotAvailable",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
