"""`make run`'s stand-in kubelets under Cluster API's real controllers (issue 33): a
MachineDeployment scaled 3 -> 1 -> 3, whose removed Machines' Nodes Cluster API deletes
while their stand-ins beat, leaves the joiner running and every live Machine's Node Ready.

The joiner runs bare in the test's task group, unsupervised, so an error escaping it fails
the test, as it ended `make run`."""

from __future__ import annotations

import anyio
import pytest

from controller.dev.clusterapi import ClusterApi
from controller.dev.workload import NodeJoiner, node_name
from runtime.errors import ApiError
from runtime.jsonobj import Json
from tests.capi_support import CONTROL_PLANES
from tests.e2e.system import WAIT, System
from tests.e2e.test_clusterapi_e2e import CLUSTER, WORKERS, provisioned_cluster, workers

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]


async def _node(system: System, provider_id: str) -> Json | None:
    try:
        return await system.transport.request("GET", f"/api/v1/nodes/{node_name(provider_id)}")
    except ApiError as err:
        if err.status == 404:
            return None
        raise


def _ready(node: Json | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def _externally_managed_control_plane(system: System) -> None:
    """The Cluster's control plane, managed elsewhere (as a hosted one is): only then does
    Cluster API delete the Node of a Machine it removes (with no control plane Machine
    and no such control plane it keeps the Node)."""
    ns = system.kube.ns
    path = f"{CONTROL_PLANES}/namespaces/{ns}/examplecontrolplanes"
    body = {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
        "kind": "ExampleControlPlane",
        "metadata": {"name": f"{CLUSTER}-cp"},
        "spec": {},
    }
    await system.transport.request("POST", path, body=body)
    status = {
        "externalManagedControlPlane": True,
        "initialization": {"controlPlaneInitialized": True},
    }
    await system.transport.request(
        "PATCH",
        f"{path}/{CLUSTER}-cp/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )
    ref = {
        "apiGroup": "controlplane.cluster.x-k8s.io",
        "kind": "ExampleControlPlane",
        "name": f"{CLUSTER}-cp",
    }
    await system.transport.request(
        "PATCH",
        f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/clusters/{CLUSTER}",
        body={"spec": {"controlPlaneRef": ref}},
        content_type="application/merge-patch+json",
    )


async def test_scaling_3_1_3_leaves_the_stand_ins_running(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    await _externally_managed_control_plane(system)
    said: list[str] = []
    async with anyio.create_task_group() as tg:
        joiner = NodeJoiner(
            system.transport, say=lambda who, text: said.append(text), namespace=system.kube.ns
        )
        tg.start_soon(joiner.run)
        await workers(objects, replicas=3)
        first = await objects.machines_in_phase(CLUSTER, 3, "Running", within=4 * WAIT)
        await objects.scale("MachineDeployment", WORKERS, 1)
        kept = await objects.machines_in_phase(CLUSTER, 1, "Running", within=4 * WAIT)
        gone = {m["spec"]["providerID"] for m in first} - {m["spec"]["providerID"] for m in kept}
        assert len(gone) == 2
        await objects.scale("MachineDeployment", WORKERS, 3)
        final = await objects.machines_in_phase(CLUSTER, 3, "Running", within=4 * WAIT)
        for machine in final:
            assert _ready(await _node(system, machine["spec"]["providerID"]))
        left = [p for p in gone if await _node(system, p) is not None]
        tg.cancel_scope.cancel()
    assert len(said) == 5  # five Machines joined, each once
    # Cluster API deleted the removed Machines' Nodes (its control plane is externally
    # managed), and their stand-ins did not register them again.
    assert left == []
