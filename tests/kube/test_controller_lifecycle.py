"""The controller on the real API server: restores by annotation, and deletion.

A restore runs once per requested serial: a failed one is not retried for that
serial. Deleting an object runs a destroy Job behind the `captf.io/destroy`
finalizer, which is removed once the destroy succeeds."""

from __future__ import annotations

import pytest

from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.envtest.client import RequestFailed
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    condition_is,
    controller_on,
    event_for,
    eventually,
    job_env,
    next_is,
    nth_job,
    succeed_apply,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"


async def _applied(kube: Kube, clock: SteppedClock) -> Json:
    job = await nth_job(kube, 1)
    await succeed_apply(kube, job, serial=1, at=clock.now())
    await condition_is(kube, "Ready", "True", "Applied")
    return job


async def test_a_failed_restore_is_not_retried(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        await _applied(kube, clock)
        await kube.annotate(CLUSTERS, "c1", {"captf.io/restore-serial": "3"})
        restore = await nth_job(kube, 1, "captf.io/op=restore")
        assert restore["metadata"]["annotations"]["captf.io/restore-serial"] == "3"
        assert job_env(restore)["CAPTF_RESTORE_SERIAL"] == "3"
        await clock.advance(5)
        await kube.finish(restore, "failed", at=clock.now())
        await event_for(kube, restore["metadata"]["name"], "JobFailed")

        async def attempted() -> bool:
            status = (await kube.cluster())["status"]
            return status.get("lastRestoredSerial") == 3 and "activeJob" not in status

        await eventually(attempted, what="status.lastRestoredSerial == 3")
        # Never retried, and no backoff either. The failure is counted (it numbers the
        # next restore's retry) and shown for people, under restore alone.
        await clock.advance(3600)
        await next_is(kube, "Idle")
        assert len(await kube.jobs("captf.io/op=restore")) == 1
        failures = (await kube.cluster())["status"]["failures"]
        assert list(failures) == ["restore"]
        assert failures["restore"]["count"] == 1

        await kube.annotate(CLUSTERS, "c1", {"captf.io/restore-serial": None})

        async def cleared() -> bool:
            return "lastRestoredSerial" not in (await kube.cluster())["status"]

        await eventually(cleared, what="lastRestoredSerial cleared")
        assert len(await kube.jobs("captf.io/op=restore")) == 1


async def test_deleting_destroys_then_removes_the_finalizer(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        await _applied(kube, clock)
        obj = await kube.cluster()
        assert "captf.io/destroy" in obj["metadata"]["finalizers"]
        await kube.call("DELETE", kube.captf_path(CLUSTERS, "c1"))
        destroy = await nth_job(kube, 1, "captf.io/op=destroy")
        assert destroy["metadata"]["annotations"]["captf.io/retry"] == "1"
        await condition_is(kube, "Ready", "False", "Deleting")
        assert (await kube.cluster())["metadata"].get("deletionTimestamp")
        # A failed destroy backs off like any op and keeps the object.
        await clock.advance(5)
        await kube.finish(destroy, "failed", at=clock.now())
        await next_is(kube, "DeletingBackoff")
        await clock.advance(60)
        again = await nth_job(kube, 2, "captf.io/op=destroy")
        assert again["metadata"]["annotations"]["captf.io/retry"] == "2"
        await kube.finish(again, "succeeded", at=clock.now())

        async def gone() -> bool:
            try:
                await kube.cluster()
            except RequestFailed as err:
                return err.status == 404
            return False

        await eventually(gone, what="the object gone")
