"""The controller on the real API server: run slots and operation Leases.

With one run slot, a second object waits `WaitingForRunLease` until the first
object's Job is accounted. A pool waits `WaitingForClusterOperation` while its
cluster runs a Job."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from controller.cli.main import main
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    MODULE,
    Kube,
    condition_is,
    controller_on,
    create_pool,
    eventually,
    next_is,
    nth_job,
    running_controller,
    succeed_apply,
)

pytestmark = pytest.mark.kube
HOURLY = {"interval": "1h"}


async def _lease(kube: Kube, name: str) -> Json:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{kube.ns}/leases/{name}"
    return await kube.call("GET", path)


def _holder(lease: Json) -> str | None:
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return str(holder) if holder else None


async def test_one_run_slot_makes_the_second_cluster_wait(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    clock = SteppedClock()
    async with running_controller(apiserver, namespace, clock=clock, max_concurrent_runs=1):
        await kube.setup_cluster("c1")
        first = await nth_job(kube, 1, "captf.io/name=c1")
        assert _holder(await _lease(kube, "captf-run-slot-0")) == first["metadata"]["name"]
        await kube.setup_cluster("c2")
        await next_is(kube, "WaitingForRunLease", name="c2")
        waiting = await condition_is(kube, "Waiting", "True", "WaitingForRunLease", name="c2")
        assert "run slots" in waiting["message"]
        assert await kube.jobs("captf.io/name=c2") == []

        # The first Job finishes; once it is accounted its slot is free and c2 starts at
        # once (the Lease's release wakes it: no clock advance).
        await succeed_apply(kube, first, serial=1, at=clock.now(), name="c1")
        second = await nth_job(kube, 1, "captf.io/name=c2")
        accounted = (await kube.jobs("captf.io/name=c1"))[0]
        assert accounted["metadata"]["annotations"]["captf.io/accounted"] == "true"
        assert _holder(await _lease(kube, "captf-run-slot-0")) == second["metadata"]["name"]
        await condition_is(kube, "Ready", "True", name="c1")


async def test_run_slots_in_the_controller_namespace_come_free_under_namespace(
    apiserver: ApiServer, namespace: str
) -> None:
    """`captf run --namespace X --controller-namespace Y`: the slots live in Y, which the
    objects' caches do not watch; a finished Job's slot still comes free."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    home = f"{namespace}-ctl"
    await kube.call("POST", "/api/v1/namespaces", {"metadata": {"name": home}})
    slot = Kube(apiserver, home)
    async with running_controller(
        apiserver, namespace, clock=clock, max_concurrent_runs=1, controller_namespace=home
    ):
        await kube.setup_cluster("c1")
        first = await nth_job(kube, 1, "captf.io/name=c1")
        assert _holder(await _lease(slot, "captf-run-slot-0")) == first["metadata"]["name"]
        await kube.setup_cluster("c2")
        await next_is(kube, "WaitingForRunLease", name="c2")
        await succeed_apply(kube, first, serial=1, at=clock.now(), name="c1")
        second = await nth_job(kube, 1, "captf.io/name=c2")
        assert _holder(await _lease(slot, "captf-run-slot-0")) == second["metadata"]["name"]
        # No slot was made up in the objects' namespace instead.
        here = await kube.call(
            "GET",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
            "?labelSelector=captf.io/scope=run-slot",
        )
        assert here["items"] == []


async def test_a_pool_waits_while_its_cluster_runs_a_job(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace, refresh=HOURLY) as (kube, clock):
        applied = await nth_job(kube, 1, "captf.io/name=c1")
        await succeed_apply(kube, applied, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True")
        # A refresh keeps the cluster Ready while it holds the cluster's operation Lease.
        await clock.advance(3600 * 1.1)  # the interval, past any jitter (a tenth at most)
        refresh = await nth_job(kube, 1, "captf.io/op=refresh")
        lease = await _lease(kube, "captf-op-terraformcluster-c1")
        assert _holder(lease) == refresh["metadata"]["name"]
        assert lease["metadata"]["labels"] == {
            "captf.io/cluster": "c1",
            "captf.io/scope": "cluster",
        }
        await create_pool(kube)
        await next_is(kube, "WaitingForClusterOperation", name="p1", plural=POOLS)
        assert await kube.jobs("captf.io/name=p1") == []

        await kube.finish(refresh, "succeeded", at=clock.now())
        pool_job = await nth_job(kube, 1, "captf.io/name=p1")
        assert pool_job["metadata"]["labels"]["captf.io/kind"] == "TerraformMachinePool"
        member = await _lease(kube, "captf-op-terraformmachinepool-p1")
        assert _holder(member) == pool_job["metadata"]["name"]
        assert member["metadata"]["labels"]["captf.io/scope"] == "member"
        assert _holder(await _lease(kube, "captf-op-terraformcluster-c1")) is None

        # And the other way round: the cluster's next refresh waits for the pool's Job.
        await clock.advance(3600 * 1.1)  # the interval, past any jitter (a tenth at most)
        await next_is(kube, "WaitingForMachineOperations")
        assert len(await kube.jobs("captf.io/op=refresh")) == 1
        await succeed_apply(kube, pool_job, serial=1, at=clock.now(), name="p1")

        async def refreshed_again() -> bool:
            return len(await kube.jobs("captf.io/op=refresh")) == 2

        await eventually(refreshed_again, what="the cluster's refresh after the pool's Job")


POOLS = "terraformmachinepools"


async def _pool_in(kube: Kube, name: str, cluster: str) -> None:
    body = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformMachinePool",
        "metadata": {"name": name},
        "spec": {
            "source": {"configMapRef": {"name": "pools-module"}},
            "variables": {"size": 1},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"},
        },
    }
    await kube.create_member(body, cluster=cluster)


async def test_a_cluster_at_its_cap_waits_while_another_cluster_takes_a_free_slot(
    apiserver: ApiServer, namespace: str
) -> None:
    """--max-concurrent-runs 3 --max-concurrent-runs-per-cluster 1: the second pool of
    cluster c1 waits though two slots are free; a pool of c2 takes one."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    module = {"metadata": {"name": "pools-module"}, "data": MODULE}
    await kube.call("POST", f"/api/v1/namespaces/{namespace}/configmaps", module)
    async with running_controller(
        apiserver, namespace, clock=clock, max_concurrent_runs=3, max_concurrent_runs_per_cluster=1
    ):
        for cluster in ("c1", "c2"):  # applied, so that their pools may run
            await kube.setup_cluster(cluster)
            applied = await nth_job(kube, 1, f"captf.io/name={cluster}")
            await succeed_apply(kube, applied, serial=1, at=clock.now(), name=cluster)
            await condition_is(kube, "Ready", "True", name=cluster)
        await _pool_in(kube, "p1", "c1")
        first = await nth_job(kube, 1, "captf.io/name=p1")
        slot = await _lease(kube, "captf-run-slot-0")
        assert _holder(slot) == first["metadata"]["name"]
        assert slot["metadata"]["annotations"]["captf.io/holder-cluster"] == "c1"

        await _pool_in(kube, "p2", "c1")
        waiting = await condition_is(
            kube, "Waiting", "True", "WaitingForRunLease", name="p2", plural=POOLS
        )
        assert "cluster c1 holds 1 run slots" in waiting["message"]
        await _pool_in(kube, "q1", "c2")
        await nth_job(kube, 1, "captf.io/name=q1")
        assert await kube.jobs("captf.io/name=p2") == []

        # c1's Job is accounted: its slot is free for c1's next.
        await succeed_apply(kube, first, serial=1, at=clock.now(), name="p1")
        await nth_job(kube, 1, "captf.io/name=p2")


async def test_decide_live_counts_the_cap_where_the_controller_keeps_its_slots(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37, item 4: the controller keeps its run slots in its own namespace, not the
    objects'. `captf decide --live`, told the same run-slot flags and not the namespace,
    finds the slots there and prints the wait the controller shows: WaitingForRunLease for
    the pool of a cluster at its cap (before, it counted slots in `default` and printed
    a run)."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    home = f"{namespace}-ctl"
    await kube.call("POST", "/api/v1/namespaces", {"metadata": {"name": home}})
    module = {"metadata": {"name": "pools-module"}, "data": MODULE}
    await kube.call("POST", f"/api/v1/namespaces/{namespace}/configmaps", module)
    async with running_controller(
        apiserver,
        namespace,
        clock=clock,
        controller_namespace=home,
        max_concurrent_runs=3,
        max_concurrent_runs_per_cluster=1,
    ):
        await kube.setup_cluster("c1")
        applied = await nth_job(kube, 1, "captf.io/name=c1")
        await succeed_apply(kube, applied, serial=1, at=clock.now(), name="c1")
        await condition_is(kube, "Ready", "True", name="c1")
        await _pool_in(kube, "p1", "c1")
        first = await nth_job(kube, 1, "captf.io/name=p1")
        slot = await _lease(Kube(apiserver, home), "captf-run-slot-0")
        assert _holder(slot) == first["metadata"]["name"]
        await _pool_in(kube, "p2", "c1")
        await next_is(kube, "WaitingForRunLease", name="p2", plural=POOLS)
        capsys.readouterr()
        argv = ["decide", "--live", "tfmp/p2", "-n", namespace]
        argv += ["--kubeconfig", str(apiserver.kubeconfig), "--max-concurrent-runs", "3"]
        argv += ["--max-concurrent-runs-per-cluster", "1"]
        assert await asyncio.to_thread(main, argv) == 0
        decided = orjson.loads(capsys.readouterr().out)
        assert (decided["action"], decided["reason"]) == ("requeue", "WaitingForRunLease")
