"""The controller on the real API server: approvals by annotation.

A guarded apply that finds a destructive plan is blocked and waits for
`captf.io/approve=<that Job>`; in Manual mode every apply waits for its plan to
be approved and carries that plan out."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.envtest import ApiServer
from tests.kube.harness import (
    condition_is,
    controller_on,
    event_for,
    events_of,
    eventually,
    job_env,
    job_notes,
    new_job,
    next_is,
    nth_job,
    succeed_apply,
    write_plan,
)

pytestmark = pytest.mark.kube
Json = dict[str, Any]
CLUSTERS = "terraformclusters"
MANUAL = {"mode": "Manual"}


async def test_blocked_then_approved_then_applied(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        blocked = await nth_job(kube, 1)
        assert job_notes(blocked)["captf.io/guarded"] == "true"
        assert job_env(blocked)["CAPTF_GUARDED"] == "true"
        await kube.finish(blocked, "blocked", at=clock.now())
        name = blocked["metadata"]["name"]
        await event_for(kube, name, "DestructivePlanBlocked")
        nxt = await next_is(kube, "WaitingForApproval")
        status = (await kube.cluster())["status"]
        assert "failures" not in status  # blocked counts nowhere
        waiting = await condition_is(kube, "Waiting", "True", "WaitingForApproval")
        assert name in waiting["message"]
        # No approval, no apply: not even after the longest delay there is.
        await clock.advance(600)
        assert len(await kube.jobs()) == 1

        async def rechecked() -> bool:
            later = ((await kube.cluster())["status"]).get("next") or {}
            return later.get("reason") == "WaitingForApproval" and later["at"] > nxt["at"]

        await eventually(rechecked, what="the approval wait re-checked, still waiting")
        assert len(await kube.jobs()) == 1

        await kube.annotate(CLUSTERS, "c1", {"captf.io/approve": name})
        approved = await new_job(kube, blocked)
        assert "captf.io/guarded" not in job_notes(approved)
        assert job_env(approved)["CAPTF_GUARDED"] == "false"
        assert job_notes(approved)["captf.io/retry"] == "1"
        await succeed_apply(kube, approved, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await condition_is(kube, "ApplyJobSucceeded", "True")
        assert len(await events_of(kube, "DestructivePlanBlocked")) == 1
        assert len(await kube.jobs("captf.io/op=apply")) == 2  # the blocked one is kept


async def test_manual_mode_applies_the_approved_plan(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace, approval=MANUAL) as (kube, clock):
        plan = await nth_job(kube, 1, "captf.io/op=plan")
        name = plan["metadata"]["name"]
        plan_secret = job_env(plan)["CAPTF_PLAN_SECRET"]
        # The runner writes its plan, then reports where it is.
        await write_plan(kube, plan_secret, {"plan": "YmluYXJ5IHBsYW4="})
        await kube.finish(plan, "succeeded", at=clock.now(), result={"planSecret": plan_secret})
        waiting = await condition_is(kube, "Waiting", "True", "WaitingForApproval")
        assert name in waiting["message"]
        await next_is(kube, "WaitingForApproval")
        assert await kube.jobs("captf.io/op=apply") == []

        await kube.annotate(CLUSTERS, "c1", {"captf.io/approve": name})
        apply = await nth_job(kube, 1)
        assert job_notes(apply)["captf.io/plan-job"] == name
        assert job_env(apply)["CAPTF_APPROVED_PLAN_SECRET"] == plan_secret
        await succeed_apply(kube, apply, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        # The plan is used: nothing more to approve, nothing more to run.
        nxt = await next_is(kube, "Idle")
        assert "at" not in nxt
        assert len(await kube.jobs("captf.io/op=plan")) == 1


async def test_a_plan_without_its_plan_secret_is_a_failure(
    apiserver: ApiServer, namespace: str
) -> None:
    """A plan that reports success but whose plan cannot be read backs off, unapprovable."""
    async with controller_on(apiserver, namespace, approval=MANUAL) as (kube, clock):
        plan = await nth_job(kube, 1, "captf.io/op=plan")
        await kube.finish(plan, "succeeded", at=clock.now(), result={"planSecret": "nowhere"})
        await event_for(kube, plan["metadata"]["name"], "JobFailed")
        await next_is(kube, "InputsChangedBackoff")
        assert (await kube.cluster())["status"]["failures"]["plan"]["count"] == 1
