"""The controller on the real API server: approvals as TerraformPlan objects.

A guarded apply that finds a destructive plan is blocked and keeps that plan; in
Manual mode every apply waits for its plan. Either way the controller makes a
TerraformPlan named after the waiting Job, owned by the object, showing the plan's
counts and addresses; setting its spec.approved lets the apply carry out exactly that
plan. The annotation captf.io/approve approves nothing any more."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from controller.cli.main import main
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    MERGE,
    Kube,
    approve_plan,
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
    plan_is,
    succeed_apply,
    write_plan,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"
MANUAL = {"mode": "Manual"}
SUMMARY = {
    "fingerprint": "sha256:0f0f",
    "counts": {"create": 1, "update": 0, "replace": 1, "delete": 0},
    "resources": [
        {"address": "terraform_data.new", "action": "create"},
        {"address": "terraform_data.old", "action": "replace"},
    ],
}
PLAN_DATA = {"plan.json": "e30=", "tfplan": "AA=="}  # what the runner keeps: values stay here


async def _stop_on_plan(kube: Kube, job: Json, at: Any, outcome: str = "blocked") -> str:
    """Plays a runner that stops on its plan (or a Manual plan): it keeps the plan Secret
    the Job names, with its summary, and reports it. Returns the Job's name."""
    secret = job_env(job)["CAPTF_PLAN_SECRET"]
    await write_plan(kube, secret, PLAN_DATA, summary=SUMMARY)
    await kube.finish(job, outcome, at=at, result={"planSecret": secret})
    return str(job["metadata"]["name"])


async def test_blocked_then_approved_then_applied(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        blocked = await nth_job(kube, 1)
        assert job_notes(blocked)["captf.io/guarded"] == "true"
        assert job_env(blocked)["CAPTF_PLAN_SECRET"] == blocked["metadata"]["name"]
        name = await _stop_on_plan(kube, blocked, clock.now())
        await event_for(kube, name, "DestructivePlanBlocked")
        nxt = await next_is(kube, "WaitingForApproval")
        assert "failures" not in (await kube.cluster())["status"]  # blocked counts nowhere
        waiting = await condition_is(kube, "Waiting", "True", "WaitingForApproval")
        assert f"TerraformPlan {name}" in waiting["message"]

        plan = await plan_is(kube, name, "Pending")
        cluster = await kube.cluster()
        [owner] = plan["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "TerraformCluster",
            cluster["metadata"]["uid"],
            True,
        )
        assert plan["metadata"]["labels"]["captf.io/uid"] == cluster["metadata"]["uid"]
        assert plan["spec"] == {
            "approved": False,
            "target": {"kind": "TerraformCluster", "name": "c1", "uid": cluster["metadata"]["uid"]},
        }
        status = plan["status"]
        assert status["counts"] == SUMMARY["counts"]
        assert status["resources"] == SUMMARY["resources"]
        assert status["fingerprint"] == SUMMARY["fingerprint"]
        assert status["inputsHash"] == job_notes(blocked)["captf.io/inputs-hash"]

        # The old annotation approves nothing, not even after the longest delay there is.
        await kube.annotate(CLUSTERS, "c1", {"captf.io/approve": name})
        await clock.advance(600)

        async def rechecked() -> bool:
            later = ((await kube.cluster())["status"]).get("next") or {}
            return later.get("reason") == "WaitingForApproval" and later["at"] > nxt["at"]

        await eventually(rechecked, what="the approval wait re-checked, still waiting")
        assert len(await kube.jobs()) == 1

        await approve_plan(kube, name)
        approved = await new_job(kube, blocked)
        assert "captf.io/guarded" not in job_notes(approved)
        assert job_env(approved)["CAPTF_GUARDED"] == "false"
        # It carries out exactly the plan approved: the runner compares with it.
        assert job_notes(approved)["captf.io/plan-job"] == name
        assert job_env(approved)["CAPTF_APPROVED_PLAN_SECRET"] == name
        assert job_env(approved)["CAPTF_APPROVED_FINGERPRINT"] == SUMMARY["fingerprint"]
        assert job_notes(approved)["captf.io/retry"] == "1"
        await plan_is(kube, name, "Approved")
        await succeed_apply(kube, approved, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await plan_is(kube, name, "Applied")
        assert len(await events_of(kube, "DestructivePlanBlocked")) == 1
        assert len(await kube.jobs("captf.io/op=apply")) == 2  # the blocked one is kept


async def test_manual_mode_applies_the_approved_plan(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace, approval=MANUAL) as (kube, clock):
        plan_job = await nth_job(kube, 1, "captf.io/op=plan")
        name = await _stop_on_plan(kube, plan_job, clock.now(), "succeeded")
        waiting = await condition_is(kube, "Waiting", "True", "WaitingForApproval")
        assert name in waiting["message"]
        await plan_is(kube, name, "Pending")
        assert await kube.jobs("captf.io/op=apply") == []

        await approve_plan(kube, name)
        apply = await nth_job(kube, 1)
        assert job_notes(apply)["captf.io/plan-job"] == name
        assert (
            job_env(apply)["CAPTF_APPROVED_PLAN_SECRET"] == job_env(plan_job)["CAPTF_PLAN_SECRET"]
        )
        await succeed_apply(kube, apply, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await plan_is(kube, name, "Applied")
        # The plan is used: nothing more to approve, nothing more to run.
        nxt = await next_is(kube, "Idle")
        assert "at" not in nxt
        assert len(await kube.jobs("captf.io/op=plan")) == 1
        # The plan's lifecycle, told once each: it waited for a person, then applied.
        assert len(await events_of(kube, "PlanAwaitsApproval")) == 1
        [applying] = await events_of(kube, "ApprovedPlanApplying")
        assert name in applying["message"]


async def test_a_changed_plan_is_not_applied_and_waits_as_a_plan_of_its_own(
    apiserver: ApiServer, namespace: str
) -> None:
    """The apply of an approved plan that plans other changes refuses (plan-changed): the
    approved plan ends Changed, and the changes it found wait for their own approval."""
    async with controller_on(apiserver, namespace, approval=MANUAL) as (kube, clock):
        plan_job = await nth_job(kube, 1, "captf.io/op=plan")
        first = await _stop_on_plan(kube, plan_job, clock.now(), "succeeded")
        await plan_is(kube, first, "Pending")
        await approve_plan(kube, first)
        apply = await nth_job(kube, 1)
        await clock.advance(60)  # the apply ends after its plan was made, as it does
        second = await _stop_on_plan(kube, apply, clock.now(), "plan-changed")
        await plan_is(kube, first, "Changed")
        await plan_is(kube, second, "Pending")
        await next_is(kube, "WaitingForApproval")

        await approve_plan(kube, second)
        again = await new_job(kube, apply)
        assert job_notes(again)["captf.io/plan-job"] == second
        assert job_env(again)["CAPTF_APPROVED_PLAN_SECRET"] == second
        await succeed_apply(kube, again, serial=1, at=clock.now())
        await plan_is(kube, second, "Applied")
        assert (await kube.get("terraformplans", first))["status"]["phase"] == "Changed"


async def test_new_inputs_supersede_the_waiting_plan(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace, approval=MANUAL) as (kube, clock):
        plan_job = await nth_job(kube, 1, "captf.io/op=plan")
        first = await _stop_on_plan(kube, plan_job, clock.now(), "succeeded")
        await plan_is(kube, first, "Pending")
        patch = {"spec": {"variables": {"size": 2}}}
        await kube.call("PATCH", kube.captf_path(CLUSTERS, "c1"), patch, MERGE)
        replanned = await new_job(kube, plan_job, selector="captf.io/op=plan")
        await plan_is(kube, first, "Superseded")
        # Approving the superseded plan now does nothing: it is not the current plan.
        await approve_plan(kube, first)
        second = await _stop_on_plan(kube, replanned, clock.now(), "succeeded")
        await plan_is(kube, second, "Pending")
        await next_is(kube, "WaitingForApproval")
        assert await kube.jobs("captf.io/op=apply") == []


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
        assert (await kube.call("GET", kube.captf_path("terraformplans")))["items"] == []


async def test_decide_live_reads_the_approval(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`captf decide --live` sees the TerraformPlans as the controller does: suspended
    after the approval, it says the apply would run, not that it waits for approval."""
    async with controller_on(apiserver, namespace) as (kube, clock):
        blocked = await nth_job(kube, 1)
        name = await _stop_on_plan(kube, blocked, clock.now())
        await plan_is(kube, name, "Pending")
        await kube.call(
            "PATCH", kube.captf_path(CLUSTERS, "c1"), {"spec": {"suspend": True}}, MERGE
        )
        await next_is(kube, "WaitingForApproval")
        await approve_plan(kube, name)
        await next_is(kube, "Suspended")
        capsys.readouterr()
        argv = [
            "decide",
            "--live",
            "tfc/c1",
            "-n",
            namespace,
            "--kubeconfig",
            str(apiserver.kubeconfig),
        ]
        assert await asyncio.to_thread(main, argv) == 0
        decided = orjson.loads(capsys.readouterr().out)
        assert (decided["reason"], decided.get("op")) == ("Suspended", "apply")
