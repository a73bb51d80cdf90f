"""The local Job executor on the real API server: Jobs run as local processes, and the
status it writes is what kube-apiserver 1.35 accepts from the Job controller.

The Jobs run tiny Python scripts (`command: [python, -c, ...]`), so no tofu is needed.
Waits poll the API with a deadline; none is a fixed sleep."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

from controller.core.inputs import Inputs
from controller.core.timefmt import parse_time
from controller.executor import ANN_SIMULATE_DRAIN, Executor
from controller.executor.executor import LOST_MESSAGE
from controller.executor.status import Lost, next_status
from controller.runner.binaries import runner_environ
from runtime.envtest import ApiServer
from runtime.transport import Transport, open_transport
from tests.e2e.test_runner_tofu import MODULE

pytestmark = pytest.mark.kube

Json = dict[str, Any]

WAIT_SECONDS = 30.0

# Every script records SIGTERM in $MARK before exiting 143, as a runner reports `interrupted`.
TRAP = """
import os, pathlib, signal, sys, time
def _term(*_):
    pathlib.Path(os.environ["MARK"]).write_text("SIGTERM")
    sys.exit(143)
signal.signal(signal.SIGTERM, _term)
"""
SLEEP = TRAP + "pathlib.Path(os.environ['PIDFILE']).write_text(str(os.getpid()))\ntime.sleep(600)\n"


def job_body(
    name: str,
    script: str,
    *,
    env: list[Json] | None = None,
    deadline: int | None = None,
    annotations: dict[str, str] | None = None,
    **container: Any,
) -> Json:
    spec: Json = {
        "backoffLimit": 0,
        "podFailurePolicy": {
            "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]
        },
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 5,
                "containers": [
                    {
                        "name": "runner",
                        "image": "captf:dev",
                        "command": [sys.executable, "-c", script],
                        "env": env or [],
                        **container,
                    }
                ],
            }
        },
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    metadata: Json = {"name": name, "labels": {"captf.io/op": "apply"}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


class Harness:
    def __init__(self, api: ApiServer, transport: Transport, ns: str, tmp: Path) -> None:
        self.api = api
        self.transport = transport
        self.ns = ns
        self.tmp = tmp

    def paths(self, name: str) -> list[Json]:
        """Env entries MARK and PIDFILE: where a script records SIGTERM and its pid."""
        return [
            {"name": "MARK", "value": str(self.tmp / f"{name}.mark")},
            {"name": "PIDFILE", "value": str(self.tmp / f"{name}.pid")},
        ]

    async def create(self, body: Json) -> Json:
        path = f"/apis/batch/v1/namespaces/{self.ns}/jobs"
        return await self.transport.request("POST", path, body=body)

    async def get(self, name: str) -> Json | None:
        path = f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}"
        try:
            return await self.transport.request("GET", path)
        except Exception:
            return None

    async def until(self, name: str, check: Callable[[Json], bool], what: str) -> Json:
        deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
        job: Json | None = None
        while asyncio.get_running_loop().time() < deadline:
            job = await self.get(name)
            if job is not None and check(job):
                return job
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name}: not {what} in {WAIT_SECONDS}s; last: {job}")

    async def finished(self, name: str) -> Json:
        return await self.until(name, lambda j: terminal(j) is not None, "finished")

    async def running(self, name: str) -> Json:
        return await self.until(name, lambda j: (j.get("status") or {}).get("ready") == 1, "ready")

    async def trapped(self, name: str) -> None:
        """Ready, and its SLEEP script's SIGTERM handler installed (it then writes PIDFILE)."""
        await self.running(name)
        await self.file(self.tmp / f"{name}.pid")

    async def file(self, path: Path) -> str:
        deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            text = await anyio.Path(path).read_text() if path.exists() else ""  # noqa: ASYNC240
            if text:
                return text
            await asyncio.sleep(0.05)
        raise AssertionError(f"{path} not written in {WAIT_SECONDS}s")


def terminal(job: Json) -> Json | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            found: Json = cond
            return found
    return None


def conditions(job: Json) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""))
        for c in (job.get("status") or {}).get("conditions") or []
    }


def assert_failed(job: Json, reason: str) -> None:
    status = job["status"]
    assert conditions(job) == {
        "FailureTarget": ("True", reason),
        "Failed": ("True", reason),
    }
    assert status["failed"] == 1
    assert status.get("active", 0) == 0
    assert "completionTime" not in status
    assert "startTime" in status


# On the test's own loop: the transport's session belongs to the loop that opened it.
@pytest_asyncio.fixture(loop_scope="function")
async def h(apiserver: ApiServer, namespace: str, tmp_path: Path) -> AsyncIterator[Harness]:
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        yield Harness(apiserver, transport, namespace, tmp_path)


def executor(h: Harness, **kwargs: Any) -> Executor:
    kwargs.setdefault("image_env", {})
    return Executor(
        h.transport, namespace=h.ns, kubeconfig=h.api.kubeconfig, log_dir=h.tmp / "logs", **kwargs
    )


async def test_a_job_that_exits_zero_ends_complete_with_valid_status(h: Harness) -> None:
    async with executor(h):
        await h.create(job_body("ok", "print('hello from the job')"))
        job = await h.finished("ok")
    status = job["status"]
    assert conditions(job) == {
        "SuccessCriteriaMet": ("True", "CompletionsReached"),
        "Complete": ("True", "CompletionsReached"),
    }
    assert status["succeeded"] == 1
    assert status.get("active", 0) == 0
    assert status.get("failed", 0) == 0
    assert parse_time(status["completionTime"]) >= parse_time(status["startTime"])
    log = (h.tmp / "logs" / h.ns / "ok.log").read_text()
    assert "hello from the job" in log


async def test_a_job_that_exits_non_zero_ends_failed_backoff_limit(h: Harness) -> None:
    async with executor(h):
        await h.create(job_body("bad", "import sys; print('broken'); sys.exit(3)"))
        job = await h.finished("bad")
    assert_failed(job, "BackoffLimitExceeded")


async def test_a_job_past_its_deadline_gets_sigterm_and_fails_deadline_exceeded(
    h: Harness,
) -> None:
    async with executor(h):
        await h.create(job_body("slow", SLEEP, env=h.paths("slow"), deadline=1))
        job = await h.finished("slow")
    assert_failed(job, "DeadlineExceeded")
    assert (h.tmp / "slow.mark").read_text() == "SIGTERM"


async def test_the_time_scale_shortens_the_deadline(h: Harness) -> None:
    # 600 s of Job time at scale 300 is 2 s: well inside the wait, which 600 s is not.
    async with executor(h, time_scale=300):
        await h.create(job_body("scaled", SLEEP, env=h.paths("scaled"), deadline=600))
        job = await h.finished("scaled")
    assert_failed(job, "DeadlineExceeded")


async def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(h: Harness) -> None:
    stubborn = (
        "import os, pathlib, signal, time\n"
        "mark = pathlib.Path(os.environ['MARK'])\n"
        "signal.signal(signal.SIGTERM, lambda *_: mark.write_text('x'))\n"
        "time.sleep(600)\n"
    )
    body = job_body("stubborn", stubborn, env=h.paths("stubborn"), deadline=1)
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    async with executor(h):
        await h.create(body)
        job = await h.finished("stubborn")
    assert_failed(job, "DeadlineExceeded")
    assert (h.tmp / "stubborn.mark").exists()


async def test_drain_sends_sigterm_and_fails_the_job_by_pod_failure_policy(h: Harness) -> None:
    async with executor(h) as ex:
        await h.create(job_body("drained", SLEEP, env=h.paths("drained")))
        await h.trapped("drained")
        assert ex.drain(h.ns, "drained")
        job = await h.finished("drained")
        assert not ex.drain(h.ns, "nothing-here")
    assert_failed(job, "PodFailurePolicy")
    assert "DisruptionTarget" in terminal(job)["message"]  # type: ignore[index]
    assert (h.tmp / "drained.mark").read_text() == "SIGTERM"


async def test_the_simulate_drain_annotation_drains_a_running_job(h: Harness) -> None:
    async with executor(h):
        await h.create(job_body("annotated", SLEEP, env=h.paths("annotated")))
        await h.trapped("annotated")
        patch = {"metadata": {"annotations": {ANN_SIMULATE_DRAIN: "true"}}}
        await h.transport.request(
            "PATCH",
            f"/apis/batch/v1/namespaces/{h.ns}/jobs/annotated",
            body=patch,
            content_type="application/merge-patch+json",
        )
        job = await h.finished("annotated")
    assert_failed(job, "PodFailurePolicy")


async def test_env_secret_and_configmap_values_reach_the_process(h: Harness) -> None:
    secret = {
        "metadata": {"name": "creds"},
        "data": {
            "token": base64.b64encode(b"s3cret").decode(),
            "USER_NAME": base64.b64encode(b"alice").decode(),
        },
    }
    await h.transport.request("POST", f"/api/v1/namespaces/{h.ns}/secrets", body=secret)
    cm = {"metadata": {"name": "settings"}, "data": {"region": "local-1"}}
    await h.transport.request("POST", f"/api/v1/namespaces/{h.ns}/configmaps", body=cm)
    out = h.tmp / "env.json"
    dump = (
        "import json, os, sys\n"
        "keys = ['GREETING', 'TOKEN', 'REGION', 'CRED_USER_NAME', 'POD_NS', 'KUBECONFIG']\n"
        "json.dump({k: os.environ.get(k) for k in keys} | {'argv': sys.argv[1:]},"
        " open(os.environ['OUT'], 'w'))\n"
    )
    env: list[Json] = [
        {"name": "OUT", "value": str(out)},
        {"name": "GREETING", "value": "hello"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "REGION", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "region"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    body = job_body(
        "env",
        dump,
        env=env,
        envFrom=[{"secretRef": {"name": "creds"}, "prefix": "CRED_"}],
        args=["$(GREETING)", "$(UNDEFINED)"],
    )
    async with executor(h):
        await h.create(body)
        job = await h.finished("env")
    assert "Complete" in conditions(job)
    seen = json.loads(out.read_text())
    assert seen == {
        "GREETING": "hello",
        "TOKEN": "s3cret",
        "REGION": "local-1",
        "CRED_USER_NAME": "alice",
        "POD_NS": h.ns,
        "KUBECONFIG": str(h.api.kubeconfig),
        "argv": ["hello", "$(UNDEFINED)"],
    }


async def test_a_job_waits_for_its_missing_secret_then_runs(h: Harness) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "token"}}}]
    check = "import os, sys; sys.exit(0 if os.environ['TOKEN'] == 'finally' else 5)"
    async with executor(h):
        await h.create(job_body("waits", check, env=env))
        await h.until("waits", lambda j: "startTime" in (j.get("status") or {}), "started")
        secret = {
            "metadata": {"name": "late"},
            "data": {"token": base64.b64encode(b"finally").decode()},
        }
        await h.transport.request("POST", f"/api/v1/namespaces/{h.ns}/secrets", body=secret)
        job = await h.finished("waits")
    assert "Complete" in conditions(job)


async def test_deleting_a_running_job_stops_its_process(h: Harness) -> None:
    async with executor(h) as ex:
        await h.create(job_body("doomed", SLEEP, env=h.paths("doomed")))
        await h.running("doomed")
        pid = int(await h.file(h.tmp / "doomed.pid"))
        path = f"/apis/batch/v1/namespaces/{h.ns}/jobs/doomed"
        await h.transport.request("DELETE", path)
        assert await h.file(h.tmp / "doomed.mark") == "SIGTERM"
        await _until(lambda: not ex.running_jobs(), "the run ended")
    assert not _alive(pid)


async def test_a_job_finished_by_someone_else_has_its_process_stopped(h: Harness) -> None:
    async with executor(h) as ex:
        await h.create(job_body("taken", SLEEP, env=h.paths("taken")))
        await h.trapped("taken")
        job = await h.get("taken")
        assert job is not None
        job["status"] = next_status(job["status"], Lost("failed by the test"), datetime.now(UTC))
        path = f"/apis/batch/v1/namespaces/{h.ns}/jobs/taken/status"
        await h.transport.request("PUT", path, body=job)
        assert await h.file(h.tmp / "taken.mark") == "SIGTERM"
        await _until(lambda: not ex.running_jobs(), "the run ended")
    job = await h.get("taken")
    assert job is not None
    assert terminal(job)["message"] == "failed by the test"  # type: ignore[index]


async def test_jobs_run_concurrently(h: Harness) -> None:
    gate = h.tmp / "go"
    wait = (
        "import os, pathlib, time\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.05)\n"
    )
    names = ["one", "two", "three"]
    async with executor(h) as ex:
        for name in names:
            await h.create(job_body(name, wait))
        for name in names:
            await h.running(name)
        assert ex.running_jobs() == sorted(f"{h.ns}/{n}" for n in names)
        gate.write_text("go")
        jobs = [await h.finished(name) for name in names]
    assert all("Complete" in conditions(job) for job in jobs)


async def test_a_restarted_executor_fails_a_started_job_instead_of_rerunning_it(
    h: Harness,
) -> None:
    runs = h.tmp / "runs"
    count = f"open({str(runs)!r}, 'a').write('run\\n')\n"
    async with executor(h):
        await h.create(job_body("once", count + SLEEP, env=h.paths("once")))
        await h.trapped("once")
    # Leaving the block stopped the process and wrote no status.
    assert (h.tmp / "once.mark").read_text() == "SIGTERM"
    job = await h.get("once")
    assert job is not None
    assert terminal(job) is None
    async with executor(h):
        job = await h.finished("once")
    assert_failed(job, "BackoffLimitExceeded")
    assert terminal(job)["message"] == LOST_MESSAGE  # type: ignore[index]
    assert runs.read_text() == "run\n"


async def test_finished_and_unlabelled_and_suspended_jobs_are_left_alone(h: Harness) -> None:
    runs = h.tmp / "runs"
    count = f"open({str(runs)!r}, 'a').write('run\\n')\n"
    plain = job_body("plain", count)
    del plain["metadata"]["labels"]
    suspended = job_body("suspended", count)
    suspended["spec"]["suspend"] = True
    async with executor(h):
        await h.create(plain)
        await h.create(suspended)
        # A labelled Job created after both: once it has finished, both were seen before it.
        await h.create(job_body("marker", "pass"))
        await h.finished("marker")
    assert not runs.exists()
    for name in ("plain", "suspended"):
        job = await h.get(name)
        assert job is not None
        assert "startTime" not in (job.get("status") or {})


async def _until(check: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not {what} in {WAIT_SECONDS}s")
        await asyncio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_cli_runs_jobs_and_a_ctrl_c_leaves_no_process_behind(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    env = {**os.environ, "CAPTF_EXECUTOR_LOGS": str(logs)}
    argv = [sys.executable, "-m", "controller.cli", "dev", "executor"]
    argv += ["--kubeconfig", str(apiserver.kubeconfig), "--namespace", namespace]
    out = tmp_path / "stdout"
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    paths = [
        {"name": "MARK", "value": str(tmp_path / "mark")},
        {"name": "PIDFILE", "value": str(tmp_path / "pid")},
    ]
    with out.open("wb") as sink:
        # SIGINT at its default, as an interactive shell leaves it.
        cli = subprocess.Popen(
            argv,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            apiserver.request("POST", jobs, job_body("quick", "print('quick one')"))
            apiserver.request("POST", jobs, job_body("long", SLEEP, env=paths))
            _poll(lambda: terminal(apiserver.request("GET", f"{jobs}/quick")) is not None)
            _poll(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text() != "")
            pid = int((tmp_path / "pid").read_text())
            cli.send_signal(signal.SIGINT)
            assert cli.wait(timeout=WAIT_SECONDS) == 0
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
    assert (tmp_path / "mark").read_text() == "SIGTERM"
    assert not _alive(pid)
    printed = out.read_text()
    assert f"{namespace}/quick: Complete (CompletionsReached), exit 0" in printed
    assert "SIGINT: stopping every process" in printed
    assert f"{namespace}/long: stopped by the executor's shutdown, exit 143" in printed
    assert "quick one" in (logs / namespace / "quick.log").read_text()
    # Stopped by the shutdown, not finished: a later executor fails it as lost.
    assert terminal(apiserver.request("GET", f"{jobs}/long")) is None


def _poll(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true in {WAIT_SECONDS}s")
        time.sleep(0.05)


@pytest.mark.e2e
async def test_a_runner_job_applies_with_real_opentofu(tofu_build: Path, h: Harness) -> None:
    """`args: [runner]` runs the local `captf runner` with the tofu build as the image's env;
    the runner writes its result on the Job, the executor the status."""
    build = tofu_build
    infra = h.tmp / "infra"
    infra.mkdir()
    inputs = Inputs(module={"main.tf": MODULE}, variables={"dir": str(infra)})
    data = {k: base64.b64encode(v).decode() for k, v in inputs.secret_data().items()}
    meta = {
        "name": f"c-inputs-{inputs.hash8}",
        "annotations": {"captf.io/inputs-hash": inputs.hash},
    }
    secret = {"metadata": meta, "data": data, "immutable": True}
    await h.transport.request("POST", f"/api/v1/namespaces/{h.ns}/secrets", body=secret)
    env = {
        "CAPTF_OP": "apply",
        "CAPTF_OBJECT_NAME": "c",
        "CAPTF_OBJECT_KIND": "TerraformCluster",
        "CAPTF_INPUTS_SECRET": meta["name"],
        "CAPTF_INPUTS_HASH": inputs.hash,
        "CAPTF_STATE_SECRET": "c-state",
    }
    entries: list[Json] = [{"name": k, "value": v} for k, v in env.items()]
    entries += [
        {"name": "CAPTF_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "CAPTF_JOB_NAME", "value": "c-apply-1"},
    ]
    body = job_body("c-apply-1", "unused", env=entries)
    del body["spec"]["template"]["spec"]["containers"][0]["command"]
    body["spec"]["template"]["spec"]["containers"][0]["args"] = ["runner"]
    async with executor(h, image_env=runner_environ(build)):
        await h.create(body)
        job = await h.until("c-apply-1", lambda j: terminal(j) is not None, "finished")
    assert "Complete" in conditions(job), (h.tmp / "logs" / h.ns / "c-apply-1.log").read_text()
    result = json.loads(job["metadata"]["annotations"]["captf.io/result"])
    assert result["outcome"] == "succeeded"
    assert (infra / "managed.txt").read_text() == "hello"
