"""The controller on the real API server: a Ready TerraformMachine's health is re-read on
its schedule (HealthCheckDue, 5 min plus its jitter), and after three unhealthy readings
in a row its Machine is marked `cluster.x-k8s.io/remediate-machine` (with a
RemediationRequested Warning); a reading of running withdraws the mark."""

from __future__ import annotations

import pytest

from controller.core.basics.names import MACHINE
from controller.core.decide.triggers import HEALTH, jitter
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    condition_is,
    events_of,
    eventually,
    new_job,
    nth_job,
    running_controller,
    succeed_apply,
    write_state,
)

pytestmark = pytest.mark.kube
REMEDIATE = "cluster.x-k8s.io/remediate-machine"


def reading(health: str) -> Json:
    return {"stateSerial": 1, "contract": {"pending": [], "health": health}}


async def machine_notes(kube: Kube) -> dict[str, str]:
    found = await kube.call("GET", kube.capi_path("machines", "m1"))
    return found["metadata"].get("annotations") or {}


async def test_three_unhealthy_readings_mark_the_machine_and_running_withdraws(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        await succeed_apply(kube, await nth_job(kube, 1), serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await remediation_flow(kube, clock)


async def remediation_flow(kube: Kube, clock: SteppedClock, cluster: str = "c1") -> None:
    """Machine m1 of the Ready cluster `cluster`: applied, read stopped three times (the Machine
    marked), then running (the mark withdrawn). Also the RBAC audit's flow."""
    machine = await kube.create_role_member(MACHINE, "m1", cluster=cluster)
    late = jitter(machine["metadata"]["uid"], HEALTH, 300)
    applied = await nth_job(kube, 1, "captf.io/name=m1,captf.io/op=apply")
    await write_state(kube, applied, serial=1, name="m1")
    await kube.finish(applied, "succeeded", at=clock.now(), result=reading("stopped"))
    seen: list[Json] = []
    for n, health in enumerate(["stopped", "stopped", "running"], start=1):
        await clock.advance(300 + late + 1)
        refresh = await new_job(kube, *seen, selector="captf.io/name=m1,captf.io/op=refresh")
        seen.append(refresh)
        if n == 2:
            assert REMEDIATE not in await machine_notes(kube)  # two readings: not yet
        await kube.finish(refresh, "succeeded", at=clock.now(), result=reading(health))
        if n == 2:

            async def marked() -> bool:
                return REMEDIATE in await machine_notes(kube)

            await eventually(marked, what="the Machine marked for remediation")
            [warning] = await events_of(kube, "RemediationRequested")
            assert warning["type"] == "Warning"

    async def withdrawn() -> bool:
        return REMEDIATE not in await machine_notes(kube)

    await eventually(withdrawn, what="the mark withdrawn once the instance runs")
    assert [e["type"] for e in await events_of(kube, "RemediationWithdrawn")] == ["Normal"]
