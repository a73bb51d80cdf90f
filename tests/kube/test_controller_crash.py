"""The controller on the real API server: stopped at the worst moments, then restarted.

Stopped between creating a Job and writing status, a restarted controller
finds the Job (its name is deterministic) and creates no second one. Stopped
between a finished Job's Event and its `captf.io/accounted` annotation, it
accounts the Job again and the API server refuses the second Event."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from controller.io import api
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    condition_is,
    controller_on,
    eventually,
    next_is,
    nth_job,
    running_controller,
    succeed_apply,
)

pytestmark = pytest.mark.kube
Call = Callable[..., Awaitable[Json]]


def stall_when(real: Call, matches: Callable[..., bool], reached: anyio.Event) -> Call:
    """`real`, except that a call `matches` accepts never returns: the process is as good as
    killed there. `reached` tells the test it happened."""

    async def call(*args: Any, **kwargs: Any) -> Json:
        if matches(*args, **kwargs):
            reached.set()
            await anyio.sleep_forever()
        return await real(*args, **kwargs)

    return call


async def run_until_stalled(
    server: ApiServer,
    namespace: str,
    clock: SteppedClock,
    monkeypatch: pytest.MonkeyPatch,
    call: str,
    matches: Callable[..., bool],
) -> None:
    """Runs the controller until it makes a call to `api.<call>` that `matches` accepts, and
    stops it there, as if killed; the stall is undone afterwards."""
    reached = anyio.Event()
    monkeypatch.setattr(api, call, stall_when(getattr(api, call), matches, reached))
    async with running_controller(server, namespace, clock=clock):
        with anyio.fail_after(30):
            await reached.wait()
    monkeypatch.undo()


def stall_status_after_accounting(monkeypatch: pytest.MonkeyPatch) -> anyio.Event:
    """Lets a Job's accounting through, then stalls the next status write: the process
    stops with the Job accounted and the status that goes with it lost."""
    accounted, reached = anyio.Event(), anyio.Event()
    real_patch = api.merge_patch

    async def merge_patch(*args: Any, **kwargs: Any) -> Json:
        out = await real_patch(*args, **kwargs)
        if _marks_accounted(*args, **kwargs):
            accounted.set()
        return out

    monkeypatch.setattr(api, "merge_patch", merge_patch)
    monkeypatch.setattr(
        api, "patch_status", stall_when(api.patch_status, lambda *_: accounted.is_set(), reached)
    )
    return reached


def _writes_active_job(_client: object, _obj: Json, status: Json) -> bool:
    return bool(status.get("activeJob"))


def _marks_accounted(_client: object, _path: str, patch: Json, **_: object) -> bool:
    notes = (patch.get("metadata") or {}).get("annotations") or {}
    return "captf.io/accounted" in notes


async def _events_about(kube: Kube, job: str) -> list[Json]:
    return [e for e in await kube.events() if e["metadata"]["name"].startswith(f"{job}.")]


async def test_a_restart_creates_no_second_job_and_no_second_event(
    apiserver: ApiServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube = Kube(apiserver, namespace)
    clock = SteppedClock()
    await kube.setup_cluster()

    # 1. Stopped after creating the Job, before status names it.
    await run_until_stalled(
        apiserver, namespace, clock, monkeypatch, "patch_status", _writes_active_job
    )
    [job] = await kube.jobs()
    name = job["metadata"]["name"]
    assert "activeJob" not in ((await kube.cluster()).get("status") or {})

    async with running_controller(apiserver, namespace, clock=clock):

        async def adopted() -> bool:
            status = (await kube.cluster()).get("status") or {}
            return bool(status.get("activeJob") == name)

        await eventually(adopted, what="status.activeJob names the Job created before the stop")
        await next_is(kube, "JobRunning")
        assert [j["metadata"]["name"] for j in await kube.jobs()] == [name]

    # 2. The Job fails; stopped after its Event, before the accounted annotation.
    await kube.finish(job, "failed", at=clock.now())
    await run_until_stalled(
        apiserver, namespace, clock, monkeypatch, "merge_patch", _marks_accounted
    )
    assert len(await _events_about(kube, name)) == 1
    [stopped] = await kube.jobs()
    assert "captf.io/accounted" not in stopped["metadata"]["annotations"]

    async with running_controller(apiserver, namespace, clock=clock):

        async def accounted() -> bool:
            [again] = await kube.jobs()
            return bool(again["metadata"]["annotations"].get("captf.io/accounted") == "true")

        await eventually(accounted, what="the Job accounted after the restart")
        await next_is(kube, "InputsChangedBackoff")
        events = await _events_about(kube, name)
        assert [e["reason"] for e in events] == ["JobFailed"]
        assert events[0]["count"] == 1
        assert (await kube.cluster())["status"]["failures"]["apply"]["count"] == 1
        assert len(await kube.jobs()) == 1
        # The Leases the Job held were freed in the replay: the next attempt gets them.
        await clock.advance(60)
        second = await nth_job(kube, 2)
        assert second["metadata"]["annotations"]["captf.io/retry"] == "2"


async def test_a_restore_attempt_survives_a_stop_after_its_accounting(
    apiserver: ApiServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a restore Job is accounted, status.lastRestoredSerial is the only record that the
    serial was tried: a stop right after the accounting must not run the restore again."""
    kube = Kube(apiserver, namespace)
    clock = SteppedClock()
    await kube.setup_cluster()
    await kube.annotate("terraformclusters", "c1", {"captf.io/restore-serial": "3"})
    async with running_controller(apiserver, namespace, clock=clock):
        restore = await nth_job(kube, 1, "captf.io/op=restore")
        await kube.finish(restore, "failed", at=clock.now())
        reached = stall_status_after_accounting(monkeypatch)
        with anyio.fail_after(30):
            await reached.wait()
    monkeypatch.undo()
    [stopped] = await kube.jobs("captf.io/op=restore")
    assert stopped["metadata"]["annotations"]["captf.io/accounted"] == "true"

    async with running_controller(apiserver, namespace, clock=clock):
        # The pass that accounted the restore also started the first apply; once it is done
        # nothing holds a rerun of the restore back but the record of the attempt.
        apply = await nth_job(kube, 1)
        await clock.advance(5)
        await succeed_apply(kube, apply, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await next_is(kube, "Idle")
        assert len(await kube.jobs("captf.io/op=restore")) == 1
        assert (await kube.cluster())["status"]["lastRestoredSerial"] == 3


async def test_an_accounted_job_stops_being_active_after_a_lost_status_write(
    apiserver: ApiServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """status.activeJob must not keep naming a finished Job (members would wait for it
    forever) when the status write after its accounting was lost."""
    async with controller_on(apiserver, namespace) as (kube, clock):
        job = await nth_job(kube, 1)
        name = job["metadata"]["name"]

        async def active() -> bool:
            return bool(((await kube.cluster()).get("status") or {}).get("activeJob") == name)

        await eventually(active, what="status.activeJob names the apply")
        reached = stall_status_after_accounting(monkeypatch)
        await kube.finish(job, "failed", at=clock.now())
        with anyio.fail_after(30):
            await reached.wait()
    monkeypatch.undo()
    assert (await kube.cluster())["status"]["activeJob"] == name  # the lost write

    async with running_controller(apiserver, namespace, clock=clock):
        await next_is(kube, "InputsChangedBackoff")
        assert "activeJob" not in (await kube.cluster())["status"]
