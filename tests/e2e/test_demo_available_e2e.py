"""`make run`'s demo as Cluster API itself reads it (issue 43): the objects of
examples/clusterapi (a Cluster on a TerraformCluster with `make run`'s control plane, a
MachineDeployment of three, a MachinePool of two, and a second Cluster with no workers,
as `flaky` is once it recovers), run by the CAPTF controller with real OpenTofu, Cluster
API's manager, and `make run`'s two stand-ins: the kubelets (NodeJoiner) and the control
plane (ControlPlaneReporter), in the test's task group, unsupervised, so an error of
either fails the test.

Asserted on Cluster API's own objects, as `clusterctl describe cluster` shows them: each
Cluster Available; the MachineDeployment with three available and up-to-date replicas and
no rollout; the MachinePool with its two ready replicas, whose Nodes run the version it
asks for."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from controller.dev import controlplane
from controller.dev.clusterapi import ClusterApi
from controller.dev.controlplane import ControlPlaneReporter
from controller.dev.workload import NodeJoiner
from runtime.jsonobj import Json
from tests.e2e.capi_objects import CapiObjects, condition
from tests.e2e.system import WAIT, System

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

DEMO = "demo"
BARE = "bare"
WORKERS = "demo-md-0"
POOL = "demo-mp-0"
VERSION = "v1.35.0"  # what capi_objects' MachineDeployments and MachinePools ask for
# Five applies, then Cluster API's probes and requeues, on a shared machine.
LONG = 4 * WAIT


def _is(obj: Json | None, kind: str, status: str = "True") -> bool:
    found = condition(obj, kind)
    return found is not None and found["status"] == status


def _status(obj: Json | None) -> Json:
    found: Json = (obj or {}).get("status") or {}
    return found


def _deployment_settled(md: Json | None) -> bool:
    status = _status(md)
    counts = (status.get("availableReplicas"), status.get("upToDateReplicas"))
    return counts == (3, 3) and _is(md, "Available") and _is(md, "RollingOut", "False")


def _pool_ready(pool: Json | None) -> bool:
    status = _status(pool)
    v1beta1 = (status.get("deprecated") or {}).get("v1beta1") or {}
    return status.get("readyReplicas") == 2 and v1beta1.get("readyReplicas") == 2


async def _demo(objects: CapiObjects) -> None:
    """examples/clusterapi's objects, on the role modules as ConfigMaps."""
    await asyncio.to_thread(objects.server.install_crds, controlplane.CRDS)
    await objects.credentials()
    for role in ("cluster", "machine", "machinepool"):
        await objects.module(role)
    for name in (DEMO, BARE):
        await objects.cluster(name, module="cluster-module", control_plane=True)
        await objects.kubeconfig_secret(name)
    await objects.machine_template(WORKERS, cluster=DEMO, module="machine-module")
    bootstrap = await objects.bootstrap_secret(f"{DEMO}-bootstrap")
    await objects.machine_deployment(
        WORKERS, cluster=DEMO, template=WORKERS, replicas=3, bootstrap=bootstrap
    )
    await objects.machine_pool(
        POOL, cluster=DEMO, module="machinepool-module", replicas=2, bootstrap=bootstrap
    )


async def test_the_demo_reads_available_in_cluster_api_s_own_objects(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = CapiObjects(system.kube.server, system.kube.ns)
    ns = system.kube.ns
    said: list[tuple[str, str]] = []

    def say(who: str, text: str) -> None:
        said.append((who, text))

    await _demo(objects)
    async with anyio.create_task_group() as tg:
        tg.start_soon(NodeJoiner(system.transport, say=say, namespace=ns).run)
        tg.start_soon(ControlPlaneReporter(system.transport, say=say, namespace=ns).run)
        for name in (DEMO, BARE):
            await objects.until(
                "Cluster", name, lambda c: _is(c, "Available"), f"{name} Available", within=LONG
            )
        md = await objects.until(
            "MachineDeployment", WORKERS, _deployment_settled, "3 available, up to date", LONG
        )
        pool = await objects.until("MachinePool", POOL, _pool_ready, "2 ready replicas", LONG)
        machines = await objects.list_of("Machine", cluster=DEMO)
        nodes = [await objects.get("Node", ref["name"]) for ref in _status(pool)["nodeRefs"]]
        cluster = await objects.get("Cluster", DEMO)
        bare = await objects.get("Cluster", BARE)
        tg.cancel_scope.cancel()

    for kind in ("ControlPlaneInitialized", "ControlPlaneAvailable", "WorkersAvailable"):
        assert _is(cluster, kind), (kind, condition(cluster, kind))
        assert _is(bare, kind), (kind, condition(bare, kind))
    assert _is(cluster, "RemoteConnectionProbe")
    assert _status(cluster)["initialization"]["controlPlaneInitialized"] is True
    assert condition(bare, "WorkersAvailable")["reason"] == "NoWorkers"  # type: ignore[index]
    assert _status(md)["replicas"] == 3
    assert len(machines) == 3
    for machine in machines:
        for kind in ("Ready", "Available", "UpToDate", "NodeHealthy"):
            assert _is(machine, kind), (kind, condition(machine, kind))
        assert _status(machine)["nodeInfo"]["kubeletVersion"] == VERSION
    assert [_status(n)["nodeInfo"]["kubeletVersion"] for n in nodes] == [VERSION, VERSION]
    assert _status(pool)["versions"] == [{"version": VERSION, "replicas": 2}]
    # The control plane stand-in said so for each Cluster.
    available = {who for who, text in said if text.startswith("Available True")}
    assert available == {f"LocalControlPlane/{BARE}", f"LocalControlPlane/{DEMO}"}
