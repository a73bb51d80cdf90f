"""One Job's lifecycle in virtual time: a scripted process, an in-memory Job API."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from controller.executor.lifecycle import DEFAULT_GRACE_SECONDS, JobRun, Node
from controller.executor.process import Process
from runtime.clock import LoopClock

pytestmark = pytest.mark.looptime

Json = dict[str, Any]


class FakeProcess:
    """Exits by itself after `runs_for` seconds (never if None); on SIGTERM it exits 143
    unless `ignores_term`; SIGKILL always ends it with 137."""

    pid = 4242

    def __init__(self, runs_for: float | None, code: int, ignores_term: bool) -> None:
        self.signals: list[tuple[float, signal.Signals]] = []
        self.code: int | None = None
        self._ignores_term = ignores_term
        self._done = asyncio.Event()
        if runs_for is not None:
            asyncio.get_running_loop().call_later(runs_for, self._finish, code)

    async def wait(self) -> int:
        await self._done.wait()
        assert self.code is not None
        return self.code

    def signal(self, sig: signal.Signals) -> None:
        self.signals.append((asyncio.get_running_loop().time(), sig))
        if sig == signal.SIGKILL:
            self._finish(137)
        elif sig == signal.SIGTERM and not self._ignores_term:
            self._finish(143)

    def _finish(self, code: int) -> None:
        if self.code is None:
            self.code = code
            self._done.set()


class Spawner:
    def __init__(self, runs_for: float | None = None, code: int = 0, ignores_term: bool = False):
        self.args = (runs_for, code, ignores_term)
        self.started: list[tuple[float, list[str], dict[str, str]]] = []
        self.process: FakeProcess | None = None

    async def __call__(self, argv: Sequence[str], env: Mapping[str, str], log: Path) -> Process:
        self.started.append((asyncio.get_running_loop().time(), list(argv), dict(env)))
        self.process = FakeProcess(*self.args)
        return self.process


class Api:
    """One Job's status and the Secrets; every status write is kept in order."""

    def __init__(self, status: Json | None = None, secrets: dict[str, Json] | None = None) -> None:
        self.status: Json = status or {}
        self.writes: list[tuple[float, Json]] = []
        self.secrets = secrets or {}
        self.gone = False

    async def update_status(
        self, namespace: str, name: str, uid: str, build: Callable[[Json], Json | None]
    ) -> Json | None:
        if self.gone:
            return None
        new = build(self.status)
        if new is None:
            return None
        self.status = new
        self.writes.append((asyncio.get_running_loop().time(), new))
        return new

    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        return self.secrets.get(name) if kind == "secrets" else None

    def conditions(self) -> list[tuple[str, str]]:
        return [(c["type"], c["reason"]) for c in self.status.get("conditions") or []]

    def condition_times(self) -> list[tuple[float, list[str]]]:
        return [(t, [c["type"] for c in s.get("conditions") or []]) for t, s in self.writes]


def job(
    *,
    deadline: float | None = None,
    grace: float | None = None,
    env: list[Json] | None = None,
    fail_job_on_disruption: bool = True,
) -> Json:
    pod_spec: Json = {"containers": [{"name": "r", "args": ["runner"], "env": env or []}]}
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    spec: Json = {"template": {"spec": pod_spec}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if fail_job_on_disruption:
        rule = {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
        spec["podFailurePolicy"] = {"rules": [rule]}
    return {"metadata": {"namespace": "ns", "name": "j", "uid": "u1"}, "spec": spec}


def run_of(body: Json, api: Api, spawner: Spawner, tmp_path: Path, scale: float = 1.0) -> JobRun:
    node = Node(
        clock=LoopClock(scale),
        spawn=spawner,
        log_dir=tmp_path,
        image_env={"CAPTF_TOFU": "/opt/tofu", "SHADOWED": "image"},
        forced_env={"KUBECONFIG": "/k"},
    )
    return JobRun(body, api, node)


async def test_a_process_that_exits_zero_completes_the_job(tmp_path: Path) -> None:
    api, spawner = Api(), Spawner(runs_for=5)
    await run_of(job(), api, spawner, tmp_path).run()
    assert api.condition_times() == [
        (0, []),
        (0, []),
        (5, ["SuccessCriteriaMet", "Complete"]),
    ]
    assert [w["ready"] for _, w in api.writes] == [0, 1, 0]
    assert spawner.process is not None
    assert spawner.process.signals == []


async def test_a_non_zero_exit_fails_by_backoff_limit(tmp_path: Path) -> None:
    api = Api()
    await run_of(job(), api, Spawner(runs_for=2, code=1), tmp_path).run()
    assert api.conditions() == [
        ("FailureTarget", "BackoffLimitExceeded"),
        ("Failed", "BackoffLimitExceeded"),
    ]


async def test_the_deadline_marks_failure_target_then_sigterm_then_failed(tmp_path: Path) -> None:
    api, spawner = Api(), Spawner()
    await run_of(job(deadline=10), api, spawner, tmp_path).run()
    assert spawner.process is not None
    assert spawner.process.signals == [(10, signal.SIGTERM)]
    assert api.condition_times()[-2:] == [
        (10, ["FailureTarget"]),
        (10, ["FailureTarget", "Failed"]),
    ]
    assert api.conditions()[-1] == ("Failed", "DeadlineExceeded")
    assert api.status["terminating"] == 0


async def test_the_time_scale_compresses_the_deadline_and_the_grace(tmp_path: Path) -> None:
    api, spawner = Api(), Spawner(ignores_term=True)
    await run_of(job(deadline=100, grace=30), api, spawner, tmp_path, scale=10).run()
    assert spawner.process is not None
    assert spawner.process.signals == [(10, signal.SIGTERM), (13, signal.SIGKILL)]
    assert api.conditions()[-1] == ("Failed", "DeadlineExceeded")


async def test_sigkill_follows_after_the_default_grace(tmp_path: Path) -> None:
    api, spawner = Api(), Spawner(ignores_term=True)
    await run_of(job(deadline=1), api, spawner, tmp_path).run()
    assert spawner.process is not None
    kill_at = 1 + DEFAULT_GRACE_SECONDS
    assert spawner.process.signals == [(1, signal.SIGTERM), (kill_at, signal.SIGKILL)]


async def test_a_drain_fails_by_pod_failure_policy(tmp_path: Path) -> None:
    api, spawner = Api(), Spawner()
    run = run_of(job(), api, spawner, tmp_path)
    loop = asyncio.get_running_loop()
    loop.call_later(4, run.drain)
    loop.call_later(5, run.drain)  # a second request changes nothing
    await run.run()
    assert spawner.process is not None
    assert spawner.process.signals == [(4, signal.SIGTERM)]
    assert api.conditions()[-1] == ("Failed", "PodFailurePolicy")
    assert (
        "DisruptionTarget matching FailJob rule at index 0"
        in api.status["conditions"][-1]["message"]
    )


async def test_a_drain_without_a_fail_job_rule_counts_against_the_backoff_limit(
    tmp_path: Path,
) -> None:
    api = Api()
    run = run_of(job(fail_job_on_disruption=False), api, Spawner(), tmp_path)
    asyncio.get_running_loop().call_later(1, run.drain)
    await run.run()
    assert api.conditions()[-1] == ("Failed", "BackoffLimitExceeded")


async def test_a_deleted_job_has_its_process_stopped_and_no_status_written(tmp_path: Path) -> None:
    api, spawner = Api(), Spawner()
    run = run_of(job(deadline=100), api, spawner, tmp_path)

    def delete() -> None:
        api.gone = True
        run.kill()

    asyncio.get_running_loop().call_later(3, delete)
    await run.run()
    assert spawner.process is not None
    assert spawner.process.signals == [(3, signal.SIGTERM)]
    assert all("conditions" not in w for _, w in api.writes)


async def test_shutdown_stops_the_process_and_leaves_the_status_unfinished(tmp_path: Path) -> None:
    api, spawner = Api(), Spawner(ignores_term=True)
    run = run_of(job(grace=5), api, spawner, tmp_path)
    task = asyncio.create_task(run.run())
    await asyncio.sleep(2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.get_running_loop().time() == 7
    assert spawner.process is not None
    assert spawner.process.signals == [(2, signal.SIGTERM), (7, signal.SIGKILL)]
    assert api.status.get("conditions") is None
    assert api.status["startTime"]


async def test_a_missing_secret_is_waited_for_until_the_deadline(tmp_path: Path) -> None:
    env = [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "later", "key": "t"}}}]
    api, spawner = Api(), Spawner(runs_for=1)
    await run_of(job(deadline=10, env=env), api, spawner, tmp_path).run()
    assert spawner.started == []
    assert api.conditions() == [
        ("FailureTarget", "DeadlineExceeded"),
        ("Failed", "DeadlineExceeded"),
    ]


async def test_a_secret_that_appears_lets_the_process_start(tmp_path: Path) -> None:
    env = [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "later", "key": "t"}}}]
    api, spawner = Api(), Spawner(runs_for=1)
    asyncio.get_running_loop().call_later(5, api.secrets.update, {"later": {"data": {"t": "eA=="}}})
    await run_of(job(env=env), api, spawner, tmp_path).run()
    ((started_at, _, seen),) = spawner.started
    assert 5 <= started_at < 8
    assert seen["T"] == "x"
    assert api.conditions()[-1] == ("Complete", "CompletionsReached")


async def test_the_environment_layers_image_then_container_then_kubeconfig(tmp_path: Path) -> None:
    env = [{"name": "SHADOWED", "value": "container"}, {"name": "KUBECONFIG", "value": "/pod"}]
    spawner = Spawner(runs_for=0)
    await run_of(job(env=env), Api(), spawner, tmp_path).run()
    ((_, argv, seen),) = spawner.started
    assert argv[-1] == "runner"
    assert seen["CAPTF_TOFU"] == "/opt/tofu"
    assert seen["SHADOWED"] == "container"
    assert seen["KUBECONFIG"] == "/k"
    assert seen["HOSTNAME"].startswith("j-")


async def test_a_job_already_started_is_not_run(tmp_path: Path) -> None:
    api, spawner = Api({"startTime": "2026-01-01T00:00:00Z", "active": 1}), Spawner(runs_for=1)
    await run_of(job(), api, spawner, tmp_path).run()
    assert spawner.started == []
    assert api.writes == []


class BrokenSpawner(Spawner):
    async def __call__(self, argv: Sequence[str], env: Mapping[str, str], log: Path) -> Process:
        raise FileNotFoundError(2, "No such file or directory", argv[0])


async def test_a_command_that_cannot_start_fails_the_job(tmp_path: Path) -> None:
    api = Api()
    run = run_of(job(), api, BrokenSpawner(), tmp_path)
    await run.run()
    assert run.code == 128
    assert api.conditions()[-1] == ("Failed", "BackoffLimitExceeded")
    assert "cannot start" in run.log.read_text()


async def test_an_environment_the_executor_cannot_emulate_fails_the_job(tmp_path: Path) -> None:
    env = [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]
    api, spawner = Api(), Spawner(runs_for=1)
    await run_of(job(env=env), api, spawner, tmp_path).run()
    assert spawner.started == []
    assert api.conditions()[-1] == ("Failed", "BackoffLimitExceeded")
