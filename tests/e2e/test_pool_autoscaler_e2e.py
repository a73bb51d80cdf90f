"""The cluster-autoscaler scales a MachinePool, under Cluster API's real controllers
(issue 37, "Done when"): the MachinePool carries only the autoscaler's min/max
annotations (no `replicas-managed-by`), so spec.replicas is the size. The autoscaler's
Cluster API provider scales a node group through the MachinePool's `/scale`
subresource: it reads the Scale and updates it with the new replicas. Done here the same
way, from 2 to 4, on a pool whose group has exactly the replicas it is given (the
self-scaling module without a group API).

The pool applies 4; Cluster API copies the 4 members and matches their Nodes (the
stand-in kubelets of controller/dev/workload.py); and spec.replicas stays 4: every
version of the MachinePool the watch delivered after the scale says 4, through the
apply and the membership re-reads that follow it (before issue 37 the pool wrote its
observed 2 back within seconds)."""

from __future__ import annotations

import anyio
import pytest

from controller.dev.clusterapi import ClusterApi
from controller.dev.workload import NodeJoiner
from runtime.cache import Resource
from runtime.jsonobj import Json
from tests.e2e.capi_objects import CAPI
from tests.e2e.system import WAIT, System
from tests.e2e.test_clusterapi_e2e import jobs_of, provisioned_cluster
from tests.e2e.test_pool_membership_e2e import BOUNDS, MANAGED, pool_with, sized, watched
from tests.kube.harness import events_of

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

POOL = "c1-scaled"
GROUP, VERSION = CAPI.split("/")
MACHINE_POOLS = Resource(GROUP, VERSION, "machinepools")


async def scale_as_the_autoscaler(system: System, name: str, replicas: int) -> Json:
    """The cluster-autoscaler's SetSize: GET the MachinePool's Scale, PUT it back with
    `replicas` (an update of the subresource, guarded by the Scale's resourceVersion)."""
    path = f"/apis/{CAPI}/namespaces/{system.kube.ns}/machinepools/{name}/scale"
    scale = await system.kube.call("GET", path)
    scale["spec"]["replicas"] = replicas
    return await system.kube.call("PUT", path, scale)


async def test_the_cluster_autoscaler_scales_a_pool_through_its_scale_subresource(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    joiner = NodeJoiner(system.transport, say=lambda who, text: None, namespace=system.kube.ns)
    async with watched(system, MACHINE_POOLS) as seen, anyio.create_task_group() as tg:
        tg.start_soon(joiner.run)
        await pool_with(objects, POOL, BOUNDS)
        await objects.until(
            "MachinePool",
            POOL,
            lambda p: sized(p, 2, managed_by=None),
            "MachinePool of 2",
            within=3 * WAIT,
        )
        scaled = await scale_as_the_autoscaler(system, POOL, 4)
        assert scaled["spec"]["replicas"] == 4
        grown = await objects.until(
            "MachinePool",
            POOL,
            lambda p: sized(p, 4, managed_by=None),
            "MachinePool of 4",
            within=3 * WAIT,
        )
        # Two membership re-reads after the scaled size was reached: each is a chance to
        # write an observed size back, and none may.
        reached = len(jobs_of(system, POOL, "refresh"))

        async def two_more() -> bool:
            return len(jobs_of(system, POOL, "refresh")) >= reached + 2

        await system.until(two_more, "two more membership re-reads")
        last = await objects.get("MachinePool", POOL)
        infra = await objects.get("TerraformMachinePool", POOL)
        tg.cancel_scope.cancel()
    assert grown is not None
    assert infra is not None
    assert sized(last, 4, managed_by=None)
    assert infra["status"]["replicas"] == 4
    assert len(set(infra["spec"]["providerIDList"])) == 4
    # The scale was an apply: the first at 2, the second at 4.
    assert len(jobs_of(system, POOL, "apply")) == 2
    # Once scaled, spec.replicas never went back.
    versions = [v["spec"]["replicas"] for v in seen.of(POOL)]
    assert 4 in versions
    assert set(versions[versions.index(4) :]) == {4}, versions
    assert MANAGED not in (last or {}).get("metadata", {}).get("annotations", {})
    told = [e for e in await events_of(system.kube, "ReplicasWrittenBack")]
    assert [e for e in told if e["involvedObject"]["name"] == POOL] == []
