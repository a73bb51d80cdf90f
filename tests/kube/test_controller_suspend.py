"""spec.suspend and spec.deletionPolicy on the real API server, with the controller running."""

from __future__ import annotations

import pytest

from runtime.envtest import ApiServer, RequestFailed
from tests.kube.harness import (
    MERGE,
    condition_is,
    controller_on,
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
