"""What the runner reports, end to end: real OpenTofu in the runner, the termination
message read by the controller, status.lastRun on the object and the step histogram,
for an apply that fails and then, retried after its backoff, succeeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.jsonobj import Json
from tests.e2e.system import System, ended, result_of
from tests.e2e.test_controller_e2e import FLAKY_MODULE

pytestmark = [pytest.mark.e2e, pytest.mark.kube]
TOFU_STEPS = ["init", "plan", "show", "apply"]


async def _last_run(system: System, job: Json) -> Json:
    """status.lastRun once it reports `job`."""
    name = job["metadata"]["name"]

    async def probe() -> Json | None:
        obj = await system.kube.get("terraformclusters", "flaky")
        last = (obj.get("status") or {}).get("lastRun") or {}
        return last if last.get("job") == name else None

    return await system.until(probe, f"status.lastRun of {name}")


def _step_count(system: System, step: str, result: str) -> float:
    labels = {"kind": "TerraformCluster", "op": "apply", "step": step, "result": result}
    value = system.registry.get_sample_value("captf_runner_step_seconds_count", labels)
    return value or 0.0


async def test_last_run_after_a_failing_then_a_succeeding_apply(
    system: System, tmp_path: Path
) -> None:
    counter = tmp_path / "counter"
    variables = {"counter_file": str(counter), "failures": 1}
    # The failed provisioner taints its resource: the retry replaces it.
    guard = {"allowDestructive": True}
    await system.create_cluster("flaky", FLAKY_MODULE, variables, guard=guard)

    failed = await system.finished_job("flaky", "apply", 1)
    assert ended(failed) == "Failed", system.log(failed)
    last = await _last_run(system, failed)
    version = result_of(failed)["runtimeVersion"]
    assert version[0].isdigit()
    assert {k: last[k] for k in ("op", "result", "errorKind", "runtimeVersion")} == {
        "op": "apply",
        "result": "failed",
        "errorKind": "apply",
        "runtimeVersion": version,
    }
    # OpenTofu's headline, not the module's output (which named the attempt).
    assert last["summary"] == "local-exec provisioner error", last
    assert [s["name"] for s in last["steps"]] == TOFU_STEPS
    assert [s["exitCode"] for s in last["steps"]] == [0, 0, 0, 1]
    assert all(s["seconds"] >= 0 for s in last["steps"])
    assert last["startedAt"] <= last["finishedAt"]

    applied = await system.finished_job("flaky", "apply", 2)
    assert ended(applied) == "Complete", system.log(applied)
    last = await _last_run(system, applied)
    assert (last["result"], last["runtimeVersion"]) == ("succeeded", version)
    assert "errorKind" not in last
    assert "summary" not in last
    assert [(s["name"], s["exitCode"]) for s in last["steps"]] == [(n, 0) for n in TOFU_STEPS]

    # Each Job's steps observed once, the failed apply step as an error.
    async def observed() -> bool | None:
        return _step_count(system, "apply", "ok") == 1 or None

    await system.until(observed, "the succeeding apply step observed")
    assert _step_count(system, "apply", "error") == 1
    assert _step_count(system, "init", "ok") == 2
