"""The controller on the real API server: a Job name that comes back is a new Job.

An operator who deletes a failed, accounted apply Job makes the controller forget
that failure: the next attempt takes the same attempt number, and so the same
name. It is another object (another uid), and its failure is accounted on its
own: a second JobFailed Event, and its own accounted mark."""

from __future__ import annotations

import pytest

from controller.io.accountant import mark_accounted
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import (
    Kube,
    controller_on,
    events_of,
    eventually,
    next_is,
    nth_job,
)

pytestmark = pytest.mark.kube


async def _accounted(kube: Kube, name: str, uid: str) -> Json:
    async def probe() -> Json | None:
        for job in await kube.jobs("captf.io/op=apply"):
            meta = job["metadata"]
            notes = meta.get("annotations") or {}
            if meta["name"] == name and meta["uid"] == uid and "captf.io/accounted" in notes:
                return job
        return None

    return await eventually(probe, what=f"Job {name} ({uid}) accounted")


async def _failed_events(kube: Kube, job: str) -> list[Json]:
    return [
        e for e in await events_of(kube, "JobFailed") if e["metadata"]["name"].startswith(f"{job}.")
    ]


async def test_a_failed_job_deleted_and_tried_again_gets_its_own_event(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        first = await nth_job(kube, 1)
        name, first_uid = first["metadata"]["name"], first["metadata"]["uid"]
        await kube.finish(first, "failed", at=clock.now())
        await _accounted(kube, name, first_uid)
        await next_is(kube, "InputsChangedBackoff")
        assert len(await _failed_events(kube, name)) == 1

        # The operator forgets the failure: no failure left, so no backoff, and the
        # same attempt (same name) runs again as a new Job.
        await kube.delete_job(name)

        async def again() -> Json | None:
            jobs = await kube.jobs("captf.io/op=apply")
            fresh = [j for j in jobs if j["metadata"]["uid"] != first_uid]
            return fresh[0] if fresh else None

        second = await eventually(again, what="the apply tried again")
        assert second["metadata"]["name"] == name
        assert second["metadata"]["annotations"]["captf.io/retry"] == "1"
        await kube.finish(second, "failed", at=clock.now())
        await _accounted(kube, name, second["metadata"]["uid"])

        async def two_events() -> list[Json] | None:
            found = await _failed_events(kube, name)
            return found if len(found) == 2 else None

        events = await eventually(two_events, what=f"a JobFailed Event for each {name}")
        assert {e["involvedObject"]["name"] for e in events} == {"c1"}
        assert len({e["metadata"]["name"] for e in events}) == 2

    # A mark meant for the deleted incarnation never lands on the one that took its name.
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
    unmarked = {"metadata": {"annotations": {"captf.io/accounted": None}}}
    await kube.call("PATCH", path, unmarked, "application/merge-patch+json")
    async with open_transport(str(apiserver.kubeconfig)) as client:
        await mark_accounted(client, namespace, name, first_uid)
        assert "captf.io/accounted" not in (await kube.call("GET", path))["metadata"].get(
            "annotations", {}
        )
        await mark_accounted(client, namespace, name, second["metadata"]["uid"])
    assert (await kube.call("GET", path))["metadata"]["annotations"]["captf.io/accounted"]
