"""Names and refusals on the real API server: an object with a name as long as the schema
allows runs, applies and is deleted; a Job the API server refuses is reported in the
status, backed off, announced once per streak, and holds no run slot."""

from __future__ import annotations

import re

import pytest

from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from tests.kube.harness import (
    Kube,
    condition_is,
    controller_on,
    event_for,
    events_of,
    eventually,
    next_is,
    nth_job,
    running_controller,
    succeed_apply,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


async def test_a_60_character_name_applies_and_is_deleted(
    apiserver: ApiServer, namespace: str
) -> None:
    name = "a-cluster-name-" + "x" * 44 + "1"
    assert len(name) == 60
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster(name)
    clock = SteppedClock()
    async with running_controller(apiserver, namespace, clock=clock):
        job = await nth_job(kube, 1)
        job_name = job["metadata"]["name"]
        assert len(job_name) <= 63
        assert DNS_SUBDOMAIN.match(job_name)
        assert re.fullmatch(r"a-cluster-name-x+-apply-[0-9a-f]{8}", job_name)
        assert job["metadata"]["labels"]["captf.io/name"] == name
        await succeed_apply(kube, job, serial=1, at=clock.now(), name=name)
        await condition_is(kube, "Ready", "True", "Applied", name=name)

        await kube.call("DELETE", kube.captf_path(CLUSTERS, name))
        destroy = await nth_job(kube, 1, "captf.io/op=destroy")
        assert len(destroy["metadata"]["name"]) <= 63
        await kube.finish(destroy, "succeeded", at=clock.now())

        async def gone() -> bool:
            found = await kube.call("GET", kube.captf_path(CLUSTERS), None)
            return all(o["metadata"]["name"] != name for o in found["items"])

        await eventually(gone, what=f"{name} deleted")
    assert not await events_of(kube, "ReconcileError")


async def test_a_refused_job_backs_off_with_one_event_per_streak(
    apiserver: ApiServer, namespace: str
) -> None:
    # A quota of no Jobs: the API server refuses every Job of the namespace (403). No quota
    # controller runs here, so its status, which admission enforces, is written by hand.
    hard = {"count/jobs.batch": "0"}
    quota = {"metadata": {"name": "no-jobs"}, "spec": {"hard": hard}}
    quota_path = f"/api/v1/namespaces/{namespace}/resourcequotas"
    admin = Kube(apiserver, namespace)
    created = await admin.call("POST", quota_path, quota)
    created["status"] = {"hard": hard, "used": {"count/jobs.batch": "0"}}
    await admin.call("PUT", f"{quota_path}/no-jobs/status", created)
    async with controller_on(apiserver, namespace) as (kube, clock):
        nxt = await next_is(kube, "JobRefused")
        assert nxt["op"] == "apply"
        waiting = await condition_is(kube, "Waiting", "True", "JobRefused")
        assert "the API server refused Job c1-apply-" in waiting["message"]
        assert "forbidden" in waiting["message"]
        refused = waiting["message"].split("Job ")[1].split(":")[0]
        await event_for(kube, refused, "JobRefused")
        # Backed off like failures: 1m, then 2m; each pass is refused again.
        first_at = nxt["at"]
        await clock.advance(61)
        second = await _next_at_changes(kube, first_at)
        await clock.advance(121)
        await _next_at_changes(kube, second)
        assert len(await events_of(kube, "JobRefused")) == 1
        assert not await events_of(kube, "ReconcileError")
        # The refused Job holds no run slot or op Lease.
        leases = await kube.call(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", None
        )
        holders = [(le.get("spec") or {}).get("holderIdentity") for le in leases["items"]]
        assert refused not in holders

        await kube.call("DELETE", f"{quota_path}/no-jobs")
        await clock.advance(601)
        job = await nth_job(kube, 1)
        assert job["metadata"]["name"] == refused


async def _next_at_changes(kube: Kube, old: str) -> str:
    async def probe() -> str | None:
        nxt = ((await kube.cluster()).get("status") or {}).get("next") or {}
        changed = nxt.get("reason") == "JobRefused" and nxt.get("at") != old
        return str(nxt["at"]) if changed else None

    return await eventually(probe, what=f"status.next.at after {old}")
