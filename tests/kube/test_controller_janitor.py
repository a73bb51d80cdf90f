"""The controller on the real API server: a run slot held for a Job that never came to be
is freed by the janitor, and the object waiting for it runs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.core.basics.names import ANN_HOLDER_NAMESPACE, ANN_MEMBER_JOBS
from controller.core.leases.stale import STALE_AFTER
from controller.io.janitor import SWEEP_EVERY
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from tests.kube.harness import Kube, condition_is, new_job, next_is, running_controller

pytestmark = pytest.mark.kube


async def test_a_slot_held_by_a_job_that_never_existed_is_freed(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    taken = clock.now() - timedelta(seconds=STALE_AFTER - SWEEP_EVERY / 2)
    ghost = {
        "metadata": {
            "name": "captf-run-slot-0",
            "labels": {"captf.io/scope": "run-slot"},
            "annotations": {ANN_HOLDER_NAMESPACE: namespace},
        },
        "spec": {
            "holderIdentity": "gone-apply-00000000",
            "acquireTime": taken.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }
    await kube.call("POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", ghost)
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock, max_concurrent_runs=1):
        await next_is(kube, "WaitingForRunLease")
        # The first sweep comes before the hold is old enough: the slot stays taken.
        await clock.advance(SWEEP_EVERY)
        await next_is(kube, "WaitingForRunLease")
        assert await kube.jobs() == []
        # The second sweep finds it held past STALE_AFTER by a Job that does not exist.
        await clock.advance(SWEEP_EVERY)
        job = await new_job(kube)
        slot = await kube.call(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/captf-run-slot-0"
        )
        assert slot["spec"]["holderIdentity"] == job["metadata"]["name"]


async def test_a_member_entry_for_a_job_that_never_existed_is_freed(
    apiserver: ApiServer, namespace: str
) -> None:
    """A member recorded on its cluster's operation Lease, then stopped before creating its
    Job: the cluster waits for it until the janitor drops the entry."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    taken = clock.now() - timedelta(seconds=STALE_AFTER - SWEEP_EVERY / 2)
    stamp = taken.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    ghost = {
        "metadata": {
            "name": "captf-op-terraformcluster-c1",
            "labels": {"captf.io/cluster": "c1", "captf.io/scope": "cluster"},
            "annotations": {ANN_MEMBER_JOBS: f'{{"p1-apply-00000000": "{stamp}"}}'},
        },
        "spec": {},
    }
    await kube.call("POST", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", ghost)
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        await next_is(kube, "WaitingForMachineOperations")
        waiting = await condition_is(kube, "Waiting", "True", "WaitingForMachineOperations")
        assert "p1-apply-00000000" in waiting["message"]
        await clock.advance(SWEEP_EVERY)
        await next_is(kube, "WaitingForMachineOperations")
        assert await kube.jobs() == []
        await clock.advance(SWEEP_EVERY)
        job = await new_job(kube)
        lease = await kube.call(
            "GET",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/captf-op-terraformcluster-c1",
        )
        assert lease["spec"]["holderIdentity"] == job["metadata"]["name"]
        assert ANN_MEMBER_JOBS not in (lease["metadata"].get("annotations") or {})
