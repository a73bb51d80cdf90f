"""End to end: the controller, kube-controller-manager's Job controller, the process node
and the runner with real OpenTofu, with the controller's time compressed 60 times (one
controller minute per real second).

The "infrastructure" is a file the `local` provider manages in the test's temporary
directory, so an apply, a drift and a destroy are real. Every wait is bounded; times are
compared on the controller's clock, onto which the Job controller's wall-clock times are
moved as the controller itself moves them (controller/io/jobtimes.py)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from controller.core.basics.timefmt import parse_time
from runtime.envtest.client import RequestFailed
from runtime.jsonobj import Json
from tests.e2e.system import (
    System,
    ended,
    finished_at,
    result_of,
)
from tests.kube.harness import MERGE, approve_plan, condition, event_for, events_of, state_of

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

# Every argument of local_file forces a replacement: a new content is destructive.
FILE_MODULE = """\
variable "dir" {
  type = string
}
variable "content" {
  type    = string
  default = "hello"
}
resource "local_file" "managed" {
  filename = "${var.dir}/managed.txt"
  content  = var.content
}
"""

# Fails its first `failures` applies (a counter file stands in for a throttling cloud API).
# A failed provisioner taints the resource, so each retry replaces it.
FLAKY_MODULE = """\
variable "counter_file" {
  type = string
}
variable "failures" {
  type = number
}
resource "terraform_data" "flaky" {
  input = var.counter_file
  provisioner "local-exec" {
    command = <<-SH
      n=$(cat "${var.counter_file}" 2>/dev/null || echo 0)
      echo $((n + 1)) > "${var.counter_file}"
      if [ "$n" -lt ${var.failures} ]; then
        echo "simulated cloud API error: throttled (attempt $((n + 1)))" >&2
        exit 1
      fi
    SH
  }
}
"""


async def status_of(system: System, name: str) -> Json:
    status: Json = (await system.kube.get("terraformclusters", name)).get("status") or {}
    return status


async def condition_is(system: System, name: str, kind: str, status: str) -> Json:
    async def probe() -> Json | None:
        cond = condition(await system.kube.get("terraformclusters", name), kind)
        return cond if cond and cond["status"] == status else None

    return await system.until(probe, f"{name}: {kind}={status}")


async def set_variables(system: System, name: str, variables: Json) -> None:
    patch = {"spec": {"variables": variables}}
    await system.kube.call("PATCH", system.kube.captf_path("terraformclusters", name), patch, MERGE)


async def applied(system: System, name: str, seq: int) -> Json:
    """Apply #seq of the object, which must have succeeded, and the object Ready on it with
    the Job settled (no longer status.activeJob).

    Ready follows the state Secret, which the runner writes before its Job completes, so
    Ready alone can be seen while the Job is still active."""
    job = await system.finished_job(name, "apply", seq)
    assert ended(job) == "Complete", system.log(job)
    assert result_of(job)["outcome"] == "succeeded"

    async def ready_on_it() -> Json | None:
        status = await status_of(system, name)
        hashes = status.get("appliedInputsHash"), status.get("inputsHash")
        ready = condition({"status": status}, "Ready")
        on_it = hashes == (job["metadata"]["annotations"]["captf.io/inputs-hash"],) * 2
        settled = status.get("activeJob") != job["metadata"]["name"]
        return status if on_it and settled and ready and ready["status"] == "True" else None

    await system.until(ready_on_it, f"{name} Ready on the inputs of apply #{seq}")
    return job


async def test_a_real_apply_creates_state(system: System) -> None:
    await system.create_cluster("web", FILE_MODULE, {"dir": str(system.infra)})
    job = await applied(system, "web", 1)

    assert (system.infra / "managed.txt").read_text() == "hello"
    status = await status_of(system, "web")
    notes = (await system.kube.secret(state_of(system.kube, "web")))["metadata"]["annotations"]
    assert notes["captf.io/inputs-hash"] == status["inputsHash"]
    assert notes["captf.io/serial"] == str(status["stateSerial"])
    assert result_of(job)["stateSerial"] == status["stateSerial"] > 0
    assert (condition({"status": status}, "ApplyJobSucceeded") or {}).get("status") == "True"
    # Nothing was applied in the namespace by hand: the runner ran as the account the
    # controller provided, bound to the runner's ClusterRole.
    account = await system.kube.call("GET", _runner_path(system, "serviceaccounts"))
    assert account["metadata"]["labels"]["captf.io/runner-rbac"] == "managed"
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "captf-runner"


def _runner_path(system: System, plural: str) -> str:
    if plural == "rolebindings":
        return (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{system.kube.ns}/{plural}/captf-runner"
        )
    return f"/api/v1/namespaces/{system.kube.ns}/{plural}/captf-runner"


async def test_a_changed_variable_reapplies(system: System) -> None:
    await system.create_cluster(
        "web", FILE_MODULE, {"dir": str(system.infra)}, guard={"allowDestructive": True}
    )
    first = await applied(system, "web", 1)
    serial = (await status_of(system, "web"))["stateSerial"]

    await set_variables(system, "web", {"content": "second"})
    second = await applied(system, "web", 2)

    assert (system.infra / "managed.txt").read_text() == "second"
    old_hash = first["metadata"]["annotations"]["captf.io/inputs-hash"]
    new_hash = second["metadata"]["annotations"]["captf.io/inputs-hash"]
    assert new_hash != old_hash
    status = await status_of(system, "web")
    assert status["appliedInputsHash"] == status["inputsHash"] == new_hash
    assert status["stateSerial"] > serial
    state = await system.kube.secret(state_of(system.kube, "web"))
    assert state["metadata"]["annotations"]["captf.io/inputs-hash"] == new_hash


async def test_a_replacement_is_blocked_until_approved(system: System) -> None:
    await system.create_cluster("web", FILE_MODULE, {"dir": str(system.infra)})
    await applied(system, "web", 1)  # a create: the guard lets it through
    before = await status_of(system, "web")

    await set_variables(system, "web", {"content": "replaced"})
    blocked = await system.finished_job("web", "apply", 2)
    assert blocked["metadata"]["annotations"]["captf.io/guarded"] == "true"
    assert ended(blocked) == "Failed", system.log(blocked)
    assert result_of(blocked)["outcome"] == "blocked"
    assert "local_file.managed" in result_of(blocked)["message"]

    async def waiting() -> Json | None:
        nxt: Json = (await status_of(system, "web")).get("next") or {}
        return nxt if nxt.get("reason") == "WaitingForApproval" else None

    await system.until(waiting, "web waiting for approval")
    await event_for(system.kube, blocked["metadata"]["name"], "DestructivePlanBlocked")
    assert (system.infra / "managed.txt").read_text() == "hello"
    status = await status_of(system, "web")
    assert status["stateSerial"] == before["stateSerial"]
    assert status["appliedInputsHash"] == before["appliedInputsHash"] != status["inputsHash"]

    # Its TerraformPlan shows what the blocked apply would have done, from tofu's plan.
    name = blocked["metadata"]["name"]

    async def pending() -> Json | None:
        try:
            plan: Json = await system.kube.get("terraformplans", name)
        except RequestFailed:
            return None
        return plan if (plan.get("status") or {}).get("phase") == "Pending" else None

    plan = await system.until(pending, "web's TerraformPlan pending")
    assert plan["status"]["resources"] == [{"address": "local_file.managed", "action": "replace"}]
    assert plan["status"]["counts"]["replace"] == 1
    await approve_plan(system.kube, name)
    approved = await applied(system, "web", 3)
    assert "captf.io/guarded" not in approved["metadata"]["annotations"]
    assert (system.infra / "managed.txt").read_text() == "replaced"


@pytest.mark.parametrize("change", ["edit", "delete"])
async def test_drift_is_detected_and_remediated(system: System, change: str) -> None:
    managed = system.infra / "managed.txt"
    await system.create_cluster(
        "web",
        FILE_MODULE,
        {"dir": str(system.infra)},
        drift={"interval": "1m", "remediate": True},
    )
    await applied(system, "web", 1)
    await condition_is(system, "web", "DriftDetected", "False")  # a clean check ran

    if change == "edit":
        managed.write_text("edited behind the controller's back")
    else:
        managed.unlink()
    await condition_is(system, "web", "DriftDetected", "True")

    async def drift_found() -> Json | None:
        for job in system.jobs.latest():
            op = job["metadata"]["labels"]["captf.io/op"]
            if op == "drift" and result_of(job).get("drift") is True:
                return job
        return None

    check = await system.until(drift_found, "a drift Job that found drift")
    assert ended(check) == "Complete", system.log(check)
    assert "local_file.managed" in result_of(check)["message"]

    remediation = await applied(system, "web", 2)
    assert remediation["metadata"]["annotations"]["captf.io/drift-remediation"] == "true"
    assert managed.read_text() == "hello"
    await condition_is(system, "web", "DriftDetected", "False")
    remediated_at = finished_at(remediation)
    assert remediated_at is not None

    # Cleared by a drift check after the remediation, not by the remediation itself:
    # a clean check created once the remediation had finished (both Job times, moved
    # onto the controller's clock alike).
    async def clean_check_after() -> Json | None:
        for job in system.jobs.latest():
            op = job["metadata"]["labels"]["captf.io/op"]
            created = parse_time(job["metadata"]["creationTimestamp"])
            clean = result_of(job).get("drift") is False
            if op == "drift" and clean and created >= remediated_at:
                return job
        return None

    await system.until(clean_check_after, "a clean drift check after the remediation")


async def test_deleting_the_object_destroys_and_removes_the_finalizer(system: System) -> None:
    managed = system.infra / "managed.txt"
    await system.create_cluster("web", FILE_MODULE, {"dir": str(system.infra)})
    await applied(system, "web", 1)
    assert managed.exists()
    web = await system.kube.get("terraformclusters", "web")
    assert web["metadata"]["finalizers"] == ["captf.io/destroy"]

    await system.kube.call("DELETE", system.kube.captf_path("terraformclusters", "web"))

    async def gone() -> bool:
        try:
            await system.kube.get("terraformclusters", "web")
        except RequestFailed as err:
            return err.status == 404
        return False

    await system.until(gone, "web deleted")
    destroy = await system.finished_job("web", "destroy", 1)
    assert ended(destroy) == "Complete", system.log(destroy)
    assert not managed.exists()
    # Destroyed, the state describes nothing: the runner removed it (deletionPolicy
    # Retain is how a state outlives its object).
    secrets = await system.kube.call("GET", f"/api/v1/namespaces/{system.kube.ns}/secrets")
    assert [
        s
        for s in secrets["items"]
        if s["metadata"]["name"].startswith(state_of(system.kube, "web"))
    ] == []

    # The namespace's last object went after its destroy finished: the runner's account
    # and binding go with it.
    async def runner_rbac_gone() -> bool:
        for plural in ("rolebindings", "serviceaccounts"):
            try:
                await system.kube.call("GET", _runner_path(system, plural))
            except RequestFailed as err:
                if err.status != 404:
                    raise
                continue
            return False
        return True

    await system.until(runner_rbac_gone, "the runner's RBAC removed")


async def test_the_delay_table_with_the_time_scale(system: System, tmp_path: Path) -> None:
    """failedJobsHistoryLimit 3: after failures 1, 2, 3 the next attempt waits 1m, 2m, then
    the 10m cap (n >= L), counted from the failed Job's finish, in controller time."""
    counter = tmp_path / "counter"
    await system.create_cluster(
        "flaky",
        FLAKY_MODULE,
        {"counter_file": str(counter), "failures": 3},
        jobs={"failedJobsHistoryLimit": 3},
        guard={"allowDestructive": True},
    )
    for n, delay in enumerate((60, 120, 600), start=1):
        job = await system.finished_job("flaky", "apply", n)
        assert ended(job) == "Failed", system.log(job)
        assert result_of(job)["outcome"] == "failed"
        assert job["metadata"]["annotations"]["captf.io/retry"] == str(n)
        await event_for(system.kube, job["metadata"]["name"], "JobFailed")
        failed = finished_at(job)
        assert failed is not None

        # Every backoff the object showed while n failures were counted (a backoff's time
        # never moves, so there is exactly one), once the next attempt exists.
        await system.finished_job("flaky", "apply", n + 1)
        waits = {
            (nxt["op"], nxt["reason"], nxt["at"])
            for obj in system.clusters.of("flaky")
            if _apply_failures(obj) == n
            and (nxt := _status(obj).get("next") or {}).get("reason", "").endswith("Backoff")
        }
        assert len(waits) == 1, waits
        ((op, reason, at),) = waits
        assert (op, reason) == ("apply", "InputsChangedBackoff")
        assert parse_time(at) - failed == timedelta(seconds=delay), (n, at, failed)

        after = await system.finished_job("flaky", "apply", n + 1)
        started = parse_time(after["status"]["startTime"])
        assert started >= parse_time(at), f"attempt {n + 1} started before its backoff ended"

    # The third failure reached the limit: from then on, until a success, the object
    # carries the label that makes the tail findable; never before.
    versions = system.clusters.of("flaky")
    capped = [
        i
        for i, obj in enumerate(versions)
        if (obj["metadata"].get("labels") or {}).get("captf.io/retry-capped") == "apply"
    ]
    assert capped, "never labelled captf.io/retry-capped=apply"
    assert _apply_failures(versions[capped[0]]) == 3
    assert all(_apply_failures(versions[i]) not in (1, 2) for i in capped)
    assert len(await events_of(system.kube, "RetryCapped")) == 1
    recovered = await applied(system, "flaky", 4)
    assert recovered["metadata"]["annotations"]["captf.io/retry"] == "4"
    assert counter.read_text().strip() == "4"
    flaky = await system.kube.get("terraformclusters", "flaky")
    assert "apply" not in ((flaky.get("status") or {}).get("failures") or {})

    async def uncapped() -> bool:
        flaky = await system.kube.get("terraformclusters", "flaky")
        return "captf.io/retry-capped" not in (flaky["metadata"].get("labels") or {})

    await system.until(uncapped, "the retry-capped label cleared by the success")


def _status(obj: Json) -> Json:
    status: Json = obj.get("status") or {}
    return status


def _apply_failures(obj: Json) -> int:
    count: int = ((_status(obj).get("failures") or {}).get("apply") or {}).get("count", 0)
    return count
