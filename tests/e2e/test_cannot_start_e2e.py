"""A Job that cannot start, on the real Job controller and the process node: the object
says why within seconds instead of `JobRunning`, and after the grace the Job is ended
and counted as a failure that backs off; nothing waits out activeDeadlineSeconds.

Nothing here writes Job status or Events: kube-controller-manager's Job controller
records FailedCreate when a quota refuses the pod, and fails the Job once the controller
cuts its deadline; the process node reports an image it cannot pull as a kubelet does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import pytest_asyncio

from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.e2e.system import System, in_background, running_system
from tests.kube.harness import condition, event_for

pytestmark = [pytest.mark.e2e, pytest.mark.kube]
MODULE = 'resource "terraform_data" "x" {\n  input = var.size\n}\nvariable "size" {}\n'
MISSING = "registry.invalid/nothing:1"  # in no node image table
# Long: were the Job not ended, the test would time out long before this passes.
DEADLINE = 3600


@pytest_asyncio.fixture(loop_scope="function")
async def system(
    tofu_build: Path, cluster: ApiServer, cluster_namespace: str, tmp_path: Path
) -> AsyncIterator[System]:
    """The system with an image the node cannot pull allowed by the operator."""
    started, stop = await in_background(
        running_system(
            cluster,
            cluster_namespace,
            tmp_path,
            tofu_build,
            allowed_images=f"captf:dev,{MISSING}",
        )
    )
    try:
        yield started
    finally:
        await stop()


async def _waits_with(system: System, reason: str) -> Json:
    async def probe() -> Json | None:
        status = (await system.kube.cluster("c1")).get("status") or {}
        waiting = condition({"status": status}, "Waiting")
        return waiting if waiting and waiting.get("reason") == reason else None

    return await system.until(probe, f"Waiting {reason}")


async def _ended_and_counted(system: System) -> Json:
    """The first apply, ended by the controller and failed by the Job controller, and the
    object backing off after it."""
    job = await system.finished_job("c1", "apply", 1)
    result: Json = orjson.loads(job["metadata"]["annotations"]["captf.io/result"])
    assert result["outcome"] == "failed"
    assert result["error"]["kind"] == "CannotStart"
    [failed] = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "DeadlineExceeded"

    async def counted() -> Json | None:
        status = (await system.kube.cluster("c1")).get("status") or {}
        failures = (status.get("failures") or {}).get("apply") or {}
        return status if failures.get("count", 0) >= 1 else None

    status = await system.until(counted, "the ended apply counted as a failure")
    assert "cannot start" in status["failures"]["apply"]["message"]
    await event_for(system.kube, job["metadata"]["name"], "JobCannotStart")
    return result


async def test_a_quota_that_refuses_the_pod_is_reported_and_the_job_ended(
    system: System,
) -> None:
    quota = {"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}
    await system.kube.call("POST", f"/api/v1/namespaces/{system.kube.ns}/resourcequotas", quota)
    await system.create_cluster("c1", MODULE, {"size": 1}, jobs={"activeDeadlineSeconds": DEADLINE})
    waiting = await _waits_with(system, "JobCannotStart")
    assert "forbidden" in waiting["message"]
    result = await _ended_and_counted(system)
    assert "quota" in result["message"]


async def test_an_image_that_cannot_be_pulled_is_reported_and_the_job_ended(
    system: System,
) -> None:
    await system.create_cluster(
        "c1", MODULE, {"size": 1}, jobs={"image": MISSING, "activeDeadlineSeconds": DEADLINE}
    )
    waiting = await _waits_with(system, "ImagePullBackOff")
    assert MISSING in waiting["message"]
    result = await _ended_and_counted(system)
    assert MISSING in result["message"]
