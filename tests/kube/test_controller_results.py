"""The runner's result on the real API server: the runner's account may not touch Jobs,
and the result it leaves in its pod's termination message reaches the controller, which
records it on the Job, also when it was written while no controller ran."""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
import yaml

from controller.core.basics.timefmt import parse_time
from controller.core.decide.runner_rbac import role_binding, service_account
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import (
    MERGE,
    Kube,
    condition_is,
    event_for,
    eventually,
    install_runner_role,
    next_is,
    nth_job,
    running_controller,
    write_state,
)

pytestmark = pytest.mark.kube
RESULT = "captf.io/result"


async def _as_runner(kube: Kube, tmp_path: Path) -> Path:
    """A kubeconfig of the runner's ServiceAccount, bound to manifests/runner-rbac.yaml's
    ClusterRole as the controller binds it."""
    await asyncio.to_thread(install_runner_role, kube.server)
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{kube.ns}/rolebindings"
    await kube.call(
        "POST", f"/api/v1/namespaces/{kube.ns}/serviceaccounts", service_account(kube.ns)
    )
    await kube.call("POST", rbac, role_binding(kube.ns))
    answer = await kube.call(
        "POST",
        f"/api/v1/namespaces/{kube.ns}/serviceaccounts/captf-runner/token",
        {"spec": {"expirationSeconds": 600}},
    )
    ca = base64.b64encode(kube.server.pki.ca_cert.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "t", "cluster": {"server": kube.server.url, "certificate-authority-data": ca}}
        ],
        "users": [{"name": "runner", "user": {"token": answer["status"]["token"]}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "runner"}}],
        "current-context": "t",
    }
    path = tmp_path / "runner-kubeconfig"
    await asyncio.to_thread(path.write_text, yaml.safe_dump(config))
    return path


async def test_the_runner_account_can_neither_read_nor_patch_a_job(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster()
    job = {
        "metadata": {"name": "someone-elses"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
            }
        },
    }
    await kube.call("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/someone-elses"
    forged = {"metadata": {"annotations": {RESULT: '{"outcome":"succeeded"}'}}}
    async with open_transport(str(await _as_runner(kube, tmp_path))) as runner:
        # What the runner may do still works: its Secrets.
        await runner.request("GET", f"/api/v1/namespaces/{namespace}/secrets")
        for method, body, ctype in (
            ("PATCH", forged, MERGE),
            ("GET", None, "application/json"),
        ):
            with pytest.raises(ApiError) as refused:
                await runner.request(method, path, body=body, content_type=ctype)
            assert refused.value.status == 403
    stored = await kube.call("GET", path)
    assert RESULT not in (stored["metadata"].get("annotations") or {})


def _recorded(job: Json) -> Json | None:
    raw = (job["metadata"].get("annotations") or {}).get(RESULT)
    return orjson.loads(raw) if raw else None


async def _job(kube: Kube, name: str) -> Json:
    return await kube.call("GET", f"/apis/batch/v1/namespaces/{kube.ns}/jobs/{name}")


async def _accounted(kube: Kube, name: str) -> Json:
    async def probe() -> Json | None:
        job = await _job(kube, name)
        return job if job["metadata"]["annotations"].get("captf.io/accounted") else None

    return await eventually(probe, what=f"Job {name} accounted")


async def test_a_result_in_the_pod_reaches_the_job_also_across_a_restart(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    success = {"outcome": "succeeded", "message": "applied", "stateSerial": 1}
    async with running_controller(apiserver, namespace, clock=clock):
        first = await nth_job(kube, 1)
        name = first["metadata"]["name"]
        await write_state(kube, first, serial=1)
        await kube.finish_in_pod(
            first, orjson.dumps(success).decode(), at=clock.now(), complete=True
        )
        await condition_is(kube, "Ready", "True", "Applied")
        assert _recorded(await _accounted(kube, name)) == success
        assert (await kube.cluster())["status"]["stateSerial"] == 1

    # A new input while no controller runs; it is started, stopped, and its Job finishes
    # with a termination message that is no result before the controller comes back.
    patch = {"spec": {"variables": {"size": 2}}}
    await kube.call("PATCH", kube.captf_path("terraformclusters", "c1"), patch, MERGE)
    async with running_controller(apiserver, namespace, clock=clock):
        second = await nth_job(kube, 2)
        await clock.advance(5)  # it ran a while: it finished after the first
    at = clock.now()
    await kube.finish_in_pod(second, "Error: the provider crashed", at=at)
    assert _recorded(await _job(kube, second["metadata"]["name"])) is None

    async with running_controller(apiserver, namespace, clock=clock):
        event = await event_for(kube, second["metadata"]["name"], "InvalidRunnerResult")
        assert "runner result is not valid JSON" in event["message"]
        assert "provider crashed" not in event["message"]
        # Counted, with the usual backoff: no new Job at once.
        nxt = await next_is(kube, "InputsChangedBackoff")
        assert parse_time(nxt["at"]) == at + timedelta(minutes=1)
        recorded = _recorded(await _job(kube, second["metadata"]["name"]))
        why = "runner result is not valid JSON"
        error = {"kind": "contract", "summary": why}
        assert recorded == {"outcome": "failed", "message": why, "error": error}
        status = (await kube.cluster())["status"]
        failure = status["failures"]["apply"]
        assert failure["count"] == 1
        assert "Error: the provider crashed" not in failure["message"]
        last = status["lastRun"]
        assert (last["job"], last["result"]) == (second["metadata"]["name"], "failed")
        assert (last["errorKind"], last["summary"]) == ("contract", why)
        assert len(await kube.jobs()) == 2


async def test_a_finished_job_whose_pod_left_no_result_fails_as_before(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        first = await nth_job(kube, 1)
        await kube.finish_in_pod(first, None, at=clock.now())
        event = await event_for(kube, first["metadata"]["name"], "JobFailed")
        assert "no result" in event["message"]
        await next_is(kube, "InputsChangedBackoff")
        job = await _accounted(kube, first["metadata"]["name"])
        assert RESULT not in job["metadata"]["annotations"]


async def test_a_result_naming_another_job_is_a_counted_failure(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    forged = {"outcome": "succeeded", "message": "applied", "job": "uid-of-another-job"}
    async with running_controller(apiserver, namespace, clock=clock):
        first = await nth_job(kube, 1)
        name = first["metadata"]["name"]
        await kube.finish_in_pod(
            first, orjson.dumps(forged).decode(), at=clock.now(), complete=True
        )
        event = await event_for(kube, name, "InvalidRunnerResult")
        assert "runner result names another Job" in event["message"]
        await next_is(kube, "InputsChangedBackoff")
        assert _recorded(await _accounted(kube, name)) == {
            "outcome": "failed",
            "message": "runner result names another Job",
            "error": {"kind": "contract", "summary": "runner result names another Job"},
        }
        status = (await kube.cluster())["status"]
        last = status["lastRun"]
        assert (last["result"], last["errorKind"]) == ("failed", "contract")
        applied = next(c for c in status["conditions"] if c["type"] == "ApplyJobSucceeded")
        assert (applied["status"], applied["reason"]) == ("False", "InvalidRunnerResult")
        assert len(await kube.jobs()) == 1
