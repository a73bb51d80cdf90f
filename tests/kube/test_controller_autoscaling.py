"""The controller on the real API server: a pool whose MachinePool carries the
cluster-autoscaler's min/max annotations (so its module manages the group's size) claims
`cluster.x-k8s.io/replicas-managed-by` on the MachinePool and writes the replicas its
module observed to `MachinePool.spec.replicas`, with a ReplicasWrittenBack Event."""

from __future__ import annotations

import json

import pytest

from controller.core.basics.names import POOL
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    MERGE,
    Kube,
    condition_is,
    events_of,
    eventually,
    nth_job,
    running_controller,
    succeed_apply,
    write_state,
)

pytestmark = pytest.mark.kube
BOUNDS = {
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
}
MANAGED = "cluster.x-k8s.io/replicas-managed-by"
OUTPUTS = {
    "provider_id": None,
    "provider_id_list": ["captf://a", "captf://b", "captf://c", "captf://d"],
    "replicas": 4,
    "instances": [],
    "health": {"state": "running", "healthy": True},
}


async def test_an_autoscaled_pool_writes_its_observed_replicas_back(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        await succeed_apply(kube, await nth_job(kube, 1), serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await autoscaling_flow(kube, clock)


async def autoscaling_flow(kube: Kube, clock: SteppedClock, cluster: str = "c1") -> None:
    """Pool p2 of the Ready cluster `cluster`, its MachinePool autoscaled between 1 and 5
    at 1 replica; the module observes 4. Also the RBAC audit's flow."""
    await kube.create_role_member(POOL, "p2", cluster=cluster)
    pools = kube.capi_path("machinepools", "p2")
    await kube.call("PATCH", pools, {"metadata": {"annotations": BOUNDS}}, MERGE)
    applied = await nth_job(kube, 1, "captf.io/name=p2,captf.io/op=apply")
    state = await write_state(kube, applied, serial=1, name="p2")
    secret = f"/api/v1/namespaces/{kube.ns}/secrets/{state}"
    await kube.call("PATCH", secret, {"stringData": {"outputs.json": json.dumps(OUTPUTS)}}, MERGE)
    await kube.finish(applied, "succeeded", at=clock.now(), result={"stateSerial": 1})

    async def written() -> Json | None:
        found = await kube.call("GET", pools)
        notes = found["metadata"].get("annotations") or {}
        return found if notes.get(MANAGED) == "captf" and found["spec"]["replicas"] == 4 else None

    await eventually(written, what="MachinePool p2 claimed, spec.replicas 4")
    assert [e["involvedObject"]["name"] for e in await events_of(kube, "ReplicasWrittenBack")] == [
        "p2"
    ]
    # The first member list written is a membership change too, told by counts.
    changed = [e for e in await events_of(kube, "MembershipChanged") if _of(e, "p2")]
    assert [e["message"] for e in changed] == ["membership changed: 4 added, 0 removed; 4 members"]


def _of(event: Json, name: str) -> bool:
    return bool(event["involvedObject"]["name"] == name)
