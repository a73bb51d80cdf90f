"""spec.suspend, spec.deletionPolicy and Cluster API's pause on the real API server, with the
controller running."""

from __future__ import annotations

import pytest

from controller.core.basics.names import CLUSTER, POOL
from runtime.envtest import ApiServer, RequestFailed
from tests.kube.harness import (
    MERGE,
    Kube,
    condition_is,
    controller_on,
    create_pool,
    event_for,
    eventually,
    next_is,
    nth_job,
    state_of,
    succeed_apply,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"


async def test_suspend_holds_new_jobs_and_accounts_the_running_one(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        first = await nth_job(kube, 1)
        path = kube.captf_path(CLUSTERS, "c1")
        await kube.call("PATCH", path, {"spec": {"suspend": True}}, MERGE)
        # The running Job finishes and is accounted as usual.
        await kube.finish(first, "failed", at=clock.now())
        await event_for(kube, first["metadata"]["name"], "JobFailed")
        await next_is(kube, "InputsChangedBackoff")
        await clock.advance(60)
        nxt = await next_is(kube, "Suspended")
        assert nxt["op"] == "apply"
        waiting = await condition_is(kube, "Waiting", "True", "Suspended")
        assert waiting["message"] == "spec.suspend is true; apply (InputsChanged) would run next"
        await clock.advance(1200)
        await next_is(kube, "Suspended")
        assert len(await kube.jobs()) == 1

        await kube.call("PATCH", path, {"spec": {"suspend": False}}, MERGE)
        second = await nth_job(kube, 2)
        assert second["metadata"]["annotations"]["captf.io/retry"] == "2"


async def test_retain_removes_the_finalizer_and_keeps_the_state(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace, deletionPolicy="Retain") as (kube, clock):
        apply = await nth_job(kube, 1)
        await succeed_apply(kube, apply, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        assert "captf.io/destroy" in (await kube.cluster())["metadata"]["finalizers"]
        await kube.call("DELETE", kube.captf_path(CLUSTERS, "c1"))

        async def gone() -> bool:
            try:
                await kube.cluster()
            except RequestFailed as err:
                return err.status == 404
            return False

        await eventually(gone, what="the object gone without a destroy")
        assert await kube.jobs("captf.io/op=destroy") == []
        state = await kube.secret(state_of(kube))
        assert state["metadata"]["annotations"]["captf.io/serial"] == "1"
        # Labelled with the object it came from, for a later object to adopt.
        labels = state["metadata"]["labels"]
        assert labels["captf.io/retained-from"] == "TerraformCluster.c1"
        assert labels["captf.io/retained-uid"]


async def test_a_retained_cluster_waits_for_its_members_then_lets_go(
    apiserver: ApiServer, namespace: str
) -> None:
    # Issue 26, item 3: Retain let go at once while a pool remained; the pool inherits the
    # cluster's Retain only while the cluster exists.
    async with controller_on(apiserver, namespace, deletionPolicy="Retain") as (kube, clock):
        await succeed_apply(kube, await nth_job(kube, 1), serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await create_pool(kube)
        pool_apply = await nth_job(kube, 1, "captf.io/op=apply,captf.io/name=p1")
        await succeed_apply(kube, pool_apply, serial=1, at=clock.now(), name="p1")
        await condition_is(kube, "Ready", "True", "Applied", name="p1", plural=POOLS)
        await kube.call("DELETE", kube.captf_path(CLUSTERS, "c1"))
        await next_is(kube, "DeletionBlocked")
        waiting = await condition_is(kube, "Waiting", "True", "DeletionBlocked")
        assert waiting["message"].endswith("1 TerraformMachinePool remain")
        # The pool goes first, retained as its cluster says; then the cluster.
        await kube.call("DELETE", kube.captf_path(POOLS, "p1"))
        await eventually(lambda: _gone(kube, POOLS, "p1"), what="the pool let go")
        await clock.advance(60)
        await eventually(lambda: _gone(kube, CLUSTERS, "c1"), what="the cluster let go")
        assert await kube.jobs("captf.io/op=destroy") == []
        for name, kind in (("c1", CLUSTER), ("p1", POOL)):
            labels = (await kube.secret(state_of(kube, name, kind)))["metadata"]["labels"]
            assert labels["captf.io/retained-from"].endswith(f".{name}")


async def test_a_pause_while_a_job_runs_shows_paused_until_the_job_is_accounted(
    apiserver: ApiServer, namespace: str
) -> None:
    # Issue 26, item 9: status.next said JobRunning, not Paused, until the Job finished.
    async with controller_on(apiserver, namespace) as (kube, clock):
        first = await nth_job(kube, 1)
        await next_is(kube, "JobRunning")
        await kube.call(
            "PATCH", kube.capi_path("clusters", "c1"), {"spec": {"paused": True}}, MERGE
        )
        await next_is(kube, "Paused")
        waiting = await condition_is(kube, "Waiting", "True", "Paused")
        assert f"Job {first['metadata']['name']}, started before the pause" in waiting["message"]
        assert (await kube.cluster())["status"]["activeJob"] == first["metadata"]["name"]
        await kube.finish(first, "failed", at=clock.now())
        await event_for(kube, first["metadata"]["name"], "JobFailed")
        await condition_is(kube, "Waiting", "True", "Paused")

        async def no_longer_active() -> bool:
            return "activeJob" not in (await kube.cluster())["status"]

        await eventually(no_longer_active, what="the finished Job accounted, no longer active")
        await clock.advance(600)
        await next_is(kube, "Paused")
        assert len(await kube.jobs()) == 1  # nothing started while paused


POOLS = "terraformmachinepools"


async def _exists(kube: Kube, plural: str, name: str) -> bool:
    try:
        await kube.get(plural, name)
    except RequestFailed as err:
        if err.status == 404:
            return False
        raise
    return True


async def _gone(kube: Kube, plural: str, name: str) -> bool:
    return not await _exists(kube, plural, name)
