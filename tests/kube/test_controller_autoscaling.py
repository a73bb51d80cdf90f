"""The controller on the real API server: who sizes a pool's group (issue 37,
contract/sizing.py).

- The user's `cluster.x-k8s.io/replicas-managed-by` with the autoscaler's min/max: the
  cloud sizes the group, and the replicas the module observed go to
  `MachinePool.spec.replicas` (a ReplicasWrittenBack Event); the annotation stays the
  user's.
- The autoscaler's min/max alone: the cluster-autoscaler's `/scale` changes
  spec.replicas, which is an apply with the new replicas, and nothing writes it back.
- CAPTF's own old claim (`replicas-managed-by: captf`, written as the controller wrote
  it before, through its own transport) is withdrawn; the same value set by a user is
  kept."""

from __future__ import annotations

import base64
import json

import pytest

from controller.core.basics.names import POOL
from controller.core.contract.sizing import claim_writers
from controller.io import api
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import (
    MERGE,
    Kube,
    condition_is,
    events_of,
    eventually,
    job_env,
    new_job,
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


def _outputs(replicas: int) -> Json:
    return {
        "provider_id": None,
        "provider_id_list": [f"captf://m{i}" for i in range(replicas)],
        "replicas": replicas,
        "instances": [],
        "health": {"state": "running", "healthy": True},
    }


async def _ready_cluster(kube: Kube, clock: SteppedClock) -> None:
    await succeed_apply(kube, await nth_job(kube, 1), serial=1, at=clock.now())
    await condition_is(kube, "Ready", "True", "Applied")


async def test_a_pool_whose_cloud_sizes_its_group_writes_its_observed_replicas_back(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        await _ready_cluster(kube, clock)
        await autoscaling_flow(kube, clock)


async def autoscaling_flow(kube: Kube, clock: SteppedClock, cluster: str = "c1") -> None:
    """Pool p2 of the Ready cluster `cluster`, its MachinePool at 1 replica, sized by the
    cloud (the user's annotation) between 1 and 5; the module observes 4. Also the RBAC
    audit's flow."""
    await kube.create_role_member(POOL, "p2", cluster=cluster)
    pools = kube.capi_path("machinepools", "p2")
    notes = BOUNDS | {MANAGED: "cloud"}
    await kube.call("PATCH", pools, {"metadata": {"annotations": notes}}, MERGE)
    applied = await nth_job(kube, 1, "captf.io/name=p2,captf.io/op=apply")
    await _succeed(kube, clock, applied, "p2", _outputs(4))

    async def written() -> Json | None:
        found = await kube.call("GET", pools)
        return found if found["spec"]["replicas"] == 4 else None

    found = await eventually(written, what="MachinePool p2 spec.replicas 4")
    assert found["metadata"]["annotations"][MANAGED] == "cloud"  # the user's, untouched
    assert [e["involvedObject"]["name"] for e in await events_of(kube, "ReplicasWrittenBack")] == [
        "p2"
    ]
    # The first member list written is a membership change too, told by counts.
    changed = [e for e in await events_of(kube, "MembershipChanged") if _of(e, "p2")]
    assert [e["message"] for e in changed] == ["membership changed: 4 added, 0 removed; 4 members"]


async def test_the_cluster_autoscalers_scale_is_applied_and_holds(
    apiserver: ApiServer, namespace: str
) -> None:
    """The MachinePool carries only the autoscaler's min/max; the autoscaler scales it
    through `/scale` from 1 to 4 while the state still says 1: the pool applies 4, and
    spec.replicas stays 4 throughout (before issue 37 it was written back to 1)."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        await _ready_cluster(kube, clock)
        await kube.create_role_member(POOL, "p2")
        pools = kube.capi_path("machinepools", "p2")
        await kube.call("PATCH", pools, {"metadata": {"annotations": BOUNDS}}, MERGE)
        first = await nth_job(kube, 1, "captf.io/name=p2,captf.io/op=apply")
        assert await _rendered_replicas(kube, first) == 1
        await _succeed(kube, clock, first, "p2", _outputs(1))
        await condition_is(kube, "Ready", "True", name="p2", plural="terraformmachinepools")

        await kube.call("PATCH", f"{pools}/scale", {"spec": {"replicas": 4}}, MERGE)
        scaled = await _job_rendering(kube, 4, first)
        found = await kube.call("GET", pools)
        assert found["spec"]["replicas"] == 4
        await _succeed(kube, clock, scaled, "p2", _outputs(4), serial=2)
        await condition_is(kube, "Ready", "True", name="p2", plural="terraformmachinepools")
        found = await kube.call("GET", pools)
    assert found["spec"]["replicas"] == 4
    assert MANAGED not in (found["metadata"].get("annotations") or {})
    assert await events_of(kube, "ReplicasWrittenBack") == []


async def test_captfs_old_claim_is_withdrawn_and_a_users_is_kept(
    apiserver: ApiServer, namespace: str
) -> None:
    """p3's `captf` was written as the controller wrote it before issue 37 (a merge patch
    through its own transport); p4's by a user (`kubectl annotate`). Only p3's goes."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    claim = {"metadata": {"annotations": {MANAGED: "captf"}}}
    for name in ("p3", "p4"):
        await kube.create_role_member(POOL, name)
        path = kube.capi_path("machinepools", name)
        await kube.call("PATCH", path, {"metadata": {"annotations": BOUNDS}}, MERGE)
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        await api.merge_patch(transport, kube.capi_path("machinepools", "p3"), claim)
    user = kube.capi_path("machinepools", "p4") + "?fieldManager=kubectl-annotate"
    await kube.call("PATCH", user, claim, MERGE)
    # What the API server recorded of each write: the name contract/sizing.py knows.
    writers = {}
    for name in ("p3", "p4"):
        found = await kube.call("GET", kube.capi_path("machinepools", name))
        writers[name] = claim_writers(found["metadata"])
    assert writers == {
        "p3": [{"manager": "Python", "operation": "Update"}],
        "p4": [{"manager": "kubectl-annotate", "operation": "Update"}],
    }
    async with running_controller(apiserver, namespace, clock=clock):
        await _ready_cluster(kube, clock)

        async def withdrawn() -> list[Json] | None:
            found = await events_of(kube, "ReplicasClaimWithdrawn")
            return found or None

        [event] = await eventually(withdrawn, what="p3's old claim withdrawn")
        found = {n: await kube.call("GET", kube.capi_path("machinepools", n)) for n in ("p3", "p4")}
    assert event["involvedObject"]["name"] == "p3"
    assert MANAGED not in found["p3"]["metadata"]["annotations"]
    assert found["p4"]["metadata"]["annotations"][MANAGED] == "captf"


async def _succeed(
    kube: Kube, clock: SteppedClock, job: Json, name: str, outputs: Json, serial: int = 1
) -> None:
    """The runner's successful apply of pool `name`, its state holding `outputs`."""
    state = await write_state(kube, job, serial=serial, name=name)
    secret = f"/api/v1/namespaces/{kube.ns}/secrets/{state}"
    await kube.call("PATCH", secret, {"stringData": {"outputs.json": json.dumps(outputs)}}, MERGE)
    await kube.finish(job, "succeeded", at=clock.now(), result={"stateSerial": serial})


async def _job_rendering(kube: Kube, replicas: int, after: Json) -> Json:
    """The first apply Job of p2 after `after`, once its inputs give the module `replicas`."""
    job = await new_job(kube, after, selector="captf.io/name=p2,captf.io/op=apply")
    assert await _rendered_replicas(kube, job) == replicas
    return job


async def _rendered_replicas(kube: Kube, job: Json) -> int | None:
    name = job_env(job)["CAPTF_INPUTS_SECRET"]
    secret = await kube.call("GET", f"/api/v1/namespaces/{kube.ns}/secrets/{name}")
    raw = (secret.get("data") or {}).get("contract.json")
    return None if raw is None else int(json.loads(base64.b64decode(raw))["replicas"])


def _of(event: Json, name: str) -> bool:
    return bool(event["involvedObject"]["name"] == name)
