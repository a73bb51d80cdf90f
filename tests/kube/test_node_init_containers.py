"""Init containers and emptyDirs on the process node, as a kubelet runs them: one at a
time, in order, each to exit 0 before the next; a failure under restartPolicy Never
fails the pod (and so its Job) and no container starts; the pod's emptyDirs are shared
by all of its containers. Real Job controller; waits poll with a deadline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import eventually
from tests.kube.test_node import WAIT, Node, _condition, job_body

pytestmark = pytest.mark.kube


# Appends its NAME to /work/order (the emptyDir), after checking what came before.
STEP = """
import os, pathlib
order = pathlib.Path("/work/order".replace("/work", os.environ["WORK"]))
seen = order.read_text() if order.exists() else ""
assert seen == os.environ["BEFORE"], seen
order.write_text(seen + os.environ["NAME"] + ",")
"""
# Waits until $GATE exists (the test creates it), then exits 0.
GATE = """
import os, pathlib, time
while not pathlib.Path(os.environ["GATE"]).exists():
    time.sleep(0.05)
"""


@pytest_asyncio.fixture(loop_scope="function")
async def n(cluster: ApiServer, cluster_namespace: str, tmp_path: Path) -> AsyncIterator[Node]:
    async with open_transport(str(cluster.kubeconfig)) as transport:
        yield Node(transport, cluster_namespace, tmp_path)


def _init(name: str, script: str, env: list[Json]) -> Json:
    return {
        "name": name,
        "image": "python:3",
        "args": ["-c", script],
        "env": env,
        "volumeMounts": [{"name": "work", "mountPath": "/work"}],
    }


def _steps_job(name: str, *, fail_second: bool = False) -> Json:
    def step(step_name: str, before: str) -> Json:
        env = [
            {"name": "WORK", "value": "/work"},
            {"name": "NAME", "value": step_name},
            {"name": "BEFORE", "value": before},
        ]
        return _init(step_name, STEP, env)

    body = job_body(name, STEP)
    pod = body["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "work", "emptyDir": {}}]
    second = step("second", "wrong," if fail_second else "first,")
    pod["initContainers"] = [step("first", ""), second]
    main = pod["containers"][0]
    main["env"] = [
        {"name": "WORK", "value": "/work"},
        {"name": "NAME", "value": "main"},
        {"name": "BEFORE", "value": "first,second,"},
    ]
    main["volumeMounts"] = [{"name": "work", "mountPath": "/work"}]
    return body


def _statuses(pod: Json, key: str) -> dict[str, Json]:
    return {s["name"]: s["state"] for s in pod["status"].get(key) or []}


async def test_init_containers_run_in_order_before_the_containers_sharing_emptydirs(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        await n.create("jobs", _steps_job("steps"), group="batch/v1")
        job = await n.job_ended("steps", "Complete")
        assert job["status"]["succeeded"] == 1
        pod = await n.pod_of("steps", "Succeeded")
        order = tmp_path / "pods" / pod["metadata"]["uid"] / "v" / "work" / "order"
        assert order.read_text() == "first,second,main,"
        inits = _statuses(pod, "initContainerStatuses")
        assert [s["name"] for s in pod["status"]["initContainerStatuses"]] == ["first", "second"]
        assert all(state["terminated"]["exitCode"] == 0 for state in inits.values())
        kinds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert kinds["Initialized"] == "True"


async def test_a_failed_init_container_fails_the_pod_and_no_container_starts(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        await n.create("jobs", _steps_job("halt", fail_second=True), group="batch/v1")
        job = await n.job_ended("halt", "Failed")
        assert _condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
        pod = await n.pod_of("halt", "Failed")
        inits = _statuses(pod, "initContainerStatuses")
        assert inits["first"]["terminated"]["exitCode"] == 0
        assert inits["second"]["terminated"]["exitCode"] == 1
        main = _statuses(pod, "containerStatuses")["main"]
        assert main == {"waiting": {"reason": "PodInitializing"}}
        order = tmp_path / "pods" / pod["metadata"]["uid"] / "v" / "work" / "order"
        assert order.read_text() == "first,"
        kinds = {c["type"]: c for c in pod["status"]["conditions"]}
        assert kinds["Initialized"]["status"] == "False"
        assert kinds["Initialized"]["reason"] == "ContainersNotInitialized"


async def test_while_an_init_container_runs_the_pod_is_pending_and_not_initialized(
    n: Node, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    async with n.node:
        body = job_body("gated", "pass")
        pod_spec = body["spec"]["template"]["spec"]
        pod_spec["volumes"] = [{"name": "work", "emptyDir": {}}]
        pod_spec["initContainers"] = [_init("wait", GATE, [{"name": "GATE", "value": str(gate)}])]
        await n.create("jobs", body, group="batch/v1")

        async def initializing() -> Json | None:
            for pod in await n.pods("job-name=gated"):
                inits = _statuses(pod, "initContainerStatuses")
                if "running" in inits.get("wait", {}):
                    return pod
            return None

        pod = await eventually(initializing, within=WAIT, what="the init container running")
        assert pod["status"]["phase"] == "Pending"
        assert _statuses(pod, "containerStatuses")["main"] == {
            "waiting": {"reason": "PodInitializing"}
        }
        kinds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert kinds["Initialized"] == "False"
        gate.write_text("go")
        await n.job_ended("gated", "Complete")
