"""Events for what succeeded, on the real API server: one per Job, like the failures."""

from __future__ import annotations

import pytest

from runtime.envtest import ApiServer
from tests.kube.harness import (
    condition_is,
    controller_on,
    event_for,
    events_of,
    eventually,
    job_env,
    nth_job,
    succeed_apply,
    write_plan,
)

pytestmark = pytest.mark.kube


async def test_an_apply_is_announced_once(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        apply = await nth_job(kube, 1)
        await succeed_apply(kube, apply, serial=1, at=clock.now())
        event = await event_for(kube, apply["metadata"]["name"], "Applied")
        assert event["type"] == "Normal"
        assert event["message"] == "played succeeded"
        await condition_is(kube, "Ready", "True")
        # More reconciles (an annotation wakes one) account nothing twice.
        await kube.annotate("terraformclusters", "c1", {"example.com/poke": "1"})
        await clock.advance(30)

        async def poked() -> bool:
            return bool(await events_of(kube, "Applied"))

        await eventually(poked, what="the Applied Event")
        assert len(await events_of(kube, "Applied")) == 1


async def test_a_manual_plan_is_announced_as_ready(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace, approval={"mode": "Manual"}) as (kube, clock):
        plan = await nth_job(kube, 1, "captf.io/op=plan")
        name = plan["metadata"]["name"]
        secret = job_env(plan)["CAPTF_PLAN_SECRET"]
        await write_plan(kube, secret, {"plan.json": "e30="})
        await kube.finish(plan, "succeeded", at=clock.now(), result={"planSecret": secret})
        event = await event_for(kube, name, "PlanReady")
        assert event["message"].endswith(f"approve TerraformPlan {name} to apply it")
