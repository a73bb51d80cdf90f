"""The outcome table on the real Job controller: a deadline counts, a drain does not.

Nothing here writes Job status: kube-controller-manager's Job controller fails the Job
(DeadlineExceeded when activeDeadlineSeconds passes; PodFailurePolicy when the runner's
pod is evicted and carries DisruptionTarget), the process node runs and stops the runner
pod, and the controller counts what it sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.dev.node import cordon, drain
from runtime.clock import LoopClock
from runtime.jsonobj import Json
from tests.e2e.system import WAIT, System, ended
from tests.kube.harness import event_for

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

DEADLINE = 60

# The first apply hangs (a provisioner sleeping far past any deadline here); every later
# one passes quickly. The counter file stands in for a cloud API that hangs once.
HANGS_ONCE = """\
variable "counter_file" {
  type = string
}
resource "terraform_data" "slow" {
  input = var.counter_file
  provisioner "local-exec" {
    command = <<-SH
      n=$(cat "${var.counter_file}" 2>/dev/null || echo 0)
      echo $((n + 1)) > "${var.counter_file}"
      if [ "$n" -lt 1 ]; then sleep 600; fi
    SH
  }
}
"""


def _reason(job: Json) -> str:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return str(cond.get("reason"))
    return ""


async def status_writers(system: System, job: Json) -> set[str]:
    """Who wrote the Job's status, by its managedFields (which the watch cache drops)."""
    path = f"/apis/batch/v1/namespaces/{system.kube.ns}/jobs/{job['metadata']['name']}"
    stored = await system.kube.call("GET", path)
    return {
        str(m.get("manager"))
        for m in stored["metadata"].get("managedFields") or []
        if m.get("subresource") == "status"
    }


def _apply_failures(obj: Json) -> int:
    status: Json = obj.get("status") or {}
    count: int = ((status.get("failures") or {}).get("apply") or {}).get("count", 0)
    return count


async def test_a_run_past_its_deadline_fails_deadline_exceeded_and_counts(
    system: System, tmp_path: Path
) -> None:
    counter = tmp_path / "counter"
    await system.create_cluster(
        "hang",
        HANGS_ONCE,
        {"counter_file": str(counter)},
        # The API's floor, in real seconds: the Job controller does not scale.
        jobs={"activeDeadlineSeconds": DEADLINE},
        guard={"allowDestructive": True},
    )
    job = await system.finished_job("hang", "apply", 1, within=DEADLINE + WAIT)
    assert (ended(job), _reason(job)) == ("Failed", "DeadlineExceeded"), system.log(job)
    assert await status_writers(system, job) == {"kube-controller-manager"}
    await event_for(system.kube, job["metadata"]["name"], "JobDeadlineExceeded")

    # Counted: the object shows one apply failure, the backoff it earned.
    async def counted() -> Json | None:
        obj = await system.kube.get("terraformclusters", "hang")
        return obj if _apply_failures(obj) == 1 else None

    await system.until(counted, "one apply failure counted")


async def test_a_drained_runner_fails_by_pod_failure_policy_and_does_not_count(
    system: System, tmp_path: Path
) -> None:
    counter = tmp_path / "counter"
    await system.create_cluster(
        "drained",
        HANGS_ONCE,
        {"counter_file": str(counter)},
        guard={"allowDestructive": True},
    )

    async def hanging() -> bool:
        # The provisioner has started: the runner is deep in its apply.
        return counter.exists()

    await system.until(hanging, "the first apply hanging")
    transport = system.transport
    evicted = await drain(
        transport,
        system.node,
        LoopClock(),
        namespace=system.kube.ns,
        label_selector="captf.io/op=apply",
    )
    assert len(evicted) == 1
    await cordon(transport, system.node, unschedulable=False)

    job = await system.finished_job("drained", "apply", 1)
    assert (ended(job), _reason(job)) == ("Failed", "PodFailurePolicy"), system.log(job)
    assert await status_writers(system, job) == {"kube-controller-manager"}
    await event_for(system.kube, job["metadata"]["name"], "JobInterrupted")

    second = await system.finished_job("drained", "apply", 2)
    assert ended(second) == "Complete", system.log(second)
    # Never counted: no version of the object showed an apply failure.
    assert all(_apply_failures(obj) == 0 for obj in system.clusters.of("drained"))
