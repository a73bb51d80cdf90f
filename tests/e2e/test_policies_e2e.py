"""TerraformPolicies end to end (issue 41's done-when): the controller, the Job
controller, the process node and the runner with real OpenTofu.

A module whose `terraform_data.group` a module change would replace: a policy that
denies replacing it stops the apply after its plan (no apply step runs, even with
allowDestructive; the object waits PolicyDenied naming the policy, the rule and the
address), and an edit of the policy lets the next apply through (here, to a Warn: it
applies, with a Warning Event). A RequireApproval rule holds an Auto object until its
TerraformPlan is approved. Each policy selects only the test's namespace, by its
kubernetes.io/metadata.name label: the API server is shared with other tests."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from controller.core.basics.runner_vars import RunnerVar
from runtime.envtest.client import RequestFailed
from runtime.jsonobj import Json
from tests.e2e.system import System, ended, result_of, terminal
from tests.kube.harness import MERGE, approve_plan, condition, event_for

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

POLICIES = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/terraformpolicies"


def group_module(generation: str) -> str:
    """The group and a member beside it; a new generation replaces the group (its
    triggers_replace) and updates the member in place."""
    return f"""\
resource "terraform_data" "group" {{
  triggers_replace = "{generation}"
  input            = "{generation}"
}}
resource "terraform_data" "member" {{
  input = "{generation}"
}}
"""


def policy(system: System, name: str, action: str) -> Json:
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformPolicy",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": system.kube.ns}},
            "rules": [
                {
                    "name": "group-stays",
                    "action": action,
                    "expression": "resource.address == 'terraform_data.group'"
                    " && 'delete' in resource.change.actions",
                    "message": "the group is never replaced by an apply",
                }
            ],
        },
    }


async def create_policy(system: System, name: str, action: str) -> None:
    await system.kube.call("POST", POLICIES, policy(system, name, action))


async def delete_policy(system: System, name: str) -> None:
    with contextlib.suppress(RequestFailed):
        await system.kube.call("DELETE", f"{POLICIES}/{name}")


async def change_module(system: System, name: str, generation: str) -> None:
    path = f"/api/v1/namespaces/{system.kube.ns}/configmaps/{name}-module"
    patch = {"data": {"main.tf": group_module(generation)}}
    await system.kube.call("PATCH", path, patch, MERGE)


async def status_of(system: System, name: str) -> Json:
    status: Json = (await system.kube.get("terraformclusters", name)).get("status") or {}
    return status


async def waits(system: System, name: str, reason: str) -> Json:
    async def probe() -> Json | None:
        status = await status_of(system, name)
        return status if (status.get("next") or {}).get("reason") == reason else None

    return await system.until(probe, f"{name} waits {reason}")


async def reason_of(system: System, name: str, reason: str) -> Json:
    """The object's PolicyCompliant condition, once it has this reason."""

    async def probe() -> Json | None:
        found = condition({"status": await status_of(system, name)}, "PolicyCompliant")
        return found if found and found["reason"] == reason else None

    return await system.until(probe, f"{name} PolicyCompliant {reason}")


async def applied(system: System, name: str, seq: int) -> Json:
    job = await system.finished_job(name, "apply", seq)
    assert ended(job) == "Complete", system.log(job)
    assert result_of(job)["outcome"] == "succeeded", system.log(job)
    return job


def steps_of(job: Json) -> list[str]:
    return [step["name"] for step in result_of(job).get("steps") or []]


async def test_a_denying_policy_stops_a_replacement_until_it_is_edited(system: System) -> None:
    name = "deny-group-" + system.kube.ns[-8:]
    await create_policy(system, name, "Deny")
    try:
        await system.create_cluster("web", group_module("1"), {}, guard={"allowDestructive": True})
        first = await applied(system, "web", 1)  # creates: not matched
        assert result_of(first)["changes"]["create"] == 2
        assert result_of(first)["policy"] == {"verdict": "compliant"}, system.log(first)
        await reason_of(system, "web", "Compliant")
        serial = (await status_of(system, "web"))["stateSerial"]

        await change_module(system, "web", "2")
        denied = await system.finished_job("web", "apply", 2)
        assert ended(denied) == "Failed", system.log(denied)
        assert result_of(denied)["outcome"] == "policy-denied"
        # The plan ran, and nothing past the check: no apply step.
        assert steps_of(denied)[-2:] == ["plan", "show"]
        assert result_of(denied)["changes"]["replace"] == 1
        status = await waits(system, "web", "PolicyDenied")
        assert status["stateSerial"] == serial
        cond = condition({"status": status}, "PolicyCompliant")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "PolicyDenied")
        for said in (name, "group-stays", "terraform_data.group"):
            assert said in cond["message"]
        assert status["lastRun"]["changes"]["addresses"]["replace"] == ["terraform_data.group"]
        await event_for(system.kube, denied["metadata"]["name"], "PolicyDenied")
        # No retry while nothing changes: more than one PolicyDenied wait (600 s of the
        # controller's, 10 s here) passes with no new apply Job.
        await asyncio.sleep(12)
        applies = [j for j in system.jobs.latest() if _apply_of(j, "web")]
        assert len(applies) == 2, _applies_said(applies, await status_of(system, "web"))
        assert (await status_of(system, "web"))["next"]["reason"] == "PolicyDenied"

        # The policy edited to a Warn: the next apply goes through, with a Warning Event.
        edit = {"spec": {"rules": [policy(system, name, "Warn")["spec"]["rules"][0]]}}
        await system.kube.call("PATCH", f"{POLICIES}/{name}", edit, MERGE)
        third = await applied(system, "web", 3)
        assert "apply" in steps_of(third)
        assert result_of(third)["policy"]["verdict"] == "warned"
        await event_for(system.kube, third["metadata"]["name"], "PolicyWarning")

        await reason_of(system, "web", "PolicyWarned")
    finally:
        await delete_policy(system, name)


async def test_require_approval_holds_an_auto_object_until_its_plan_is_approved(
    system: System,
) -> None:
    name = "hold-group-" + system.kube.ns[-8:]
    await create_policy(system, name, "RequireApproval")
    try:
        await system.create_cluster("web", group_module("1"), {}, guard={"allowDestructive": True})
        await applied(system, "web", 1)
        await change_module(system, "web", "2")
        held = await system.finished_job("web", "apply", 2)
        assert result_of(held)["outcome"] == "blocked", system.log(held)
        assert "apply" not in steps_of(held)
        await waits(system, "web", "WaitingForApproval")
        await event_for(system.kube, held["metadata"]["name"], "PolicyApprovalRequired")
        await reason_of(system, "web", "ApprovalRequired")

        plan_name = held["metadata"]["name"]

        async def pending() -> Json | None:
            try:
                plan: Json = await system.kube.get("terraformplans", plan_name)
            except RequestFailed:
                return None
            return plan if (plan.get("status") or {}).get("phase") == "Pending" else None

        plan = await system.until(pending, "web's TerraformPlan pending")
        assert plan["status"]["changes"]["addresses"]["replace"] == ["terraform_data.group"]
        await approve_plan(system.kube, plan_name)
        approved = await applied(system, "web", 3)
        assert result_of(approved)["policy"]["verdict"] == "approved"

        await reason_of(system, "web", "PolicyApproved")
    finally:
        await delete_policy(system, name)


def _applies_said(jobs: list[Json], status: Json) -> str:
    """Each apply Job's name, creation, captf annotations and outcome, and the status: what
    a failure needs to say which rule let an apply run."""
    lines = [f"next: {status.get('next')}"]
    for job in jobs:
        meta = job["metadata"]
        said = {k: v for k, v in (meta.get("annotations") or {}).items() if "captf" in k}
        outcome = result_of(job).get("outcome") if terminal(job) else "running"
        lines.append(f"{meta['name']} {meta.get('creationTimestamp')} {outcome} {said}")
        lines.append(f"  policies given: {_policies_given(job)}")
    return "\n".join(lines)


def _policies_given(job: Json) -> str:
    """The policy set the Job's runner was given (its environment): the rules' names and
    the subject they saw."""
    [container] = job["spec"]["template"]["spec"]["containers"]
    for env in container.get("env") or []:
        if env["name"] == RunnerVar.POLICIES:
            given = json.loads(env.get("value") or "{}")
            rules = [f"{r['policy']}/{r['name']}" for r in given.get("rules", [])]
            return f"rules {rules} subject {given.get('subject')}"
    return "none"


def _apply_of(job: Json, name: str) -> bool:
    labels = job["metadata"].get("labels") or {}
    return labels.get("captf.io/name") == name and labels.get("captf.io/op") == "apply"
