"""The controller on the real API server: a Ready TerraformMachine's health is re-read on
its schedule (HealthCheckDue, 5 min plus its jitter), and after three unhealthy readings
in a row its Machine is marked `cluster.x-k8s.io/remediate-machine` (with a
RemediationRequested Warning); a reading of running withdraws the mark. A reading of
`terminated` marks at once, whatever the threshold (here the cluster's, 5), and the mark
is counted in `captf_remediation_requests_total`."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from controller.core.basics.names import API_VERSION, MACHINE
from controller.core.decide.triggers import HEALTH, jitter
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    condition,
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
    if health == "running":
        return {"stateSerial": 1, "contract": {"pending": [], "health": health, "healthy": True}}
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


async def test_a_terminated_instance_is_marked_at_once_and_counted(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock, registry = Kube(apiserver, namespace), SteppedClock(), CollectorRegistry()
    # The machines' threshold is their cluster's: one stopped reading of five marks nothing.
    await kube.setup_cluster(health={"unhealthyThreshold": 5})
    async with running_controller(apiserver, namespace, clock=clock, registry=registry):
        await succeed_apply(kube, await nth_job(kube, 1), serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        machine = await kube.create_role_member(MACHINE, "m1")
        late = jitter(machine["metadata"]["uid"], HEALTH, 300)
        applied = await nth_job(kube, 1, "captf.io/name=m1,captf.io/op=apply")
        await write_state(kube, applied, serial=1, name="m1")
        await kube.finish(applied, "succeeded", at=clock.now(), result=reading("running"))

        async def read_stopped() -> bool:
            found = await kube.get("terraformmachines", "m1")
            watched = condition(found, "HealthWatched") or {}
            return "read stopped" in watched.get("message", "") and (
                "1 of 5 unhealthy readings in a row" in watched["message"]
            )

        seen: list[Json] = []
        for health in ("stopped", "terminated"):
            await clock.advance(300 + late + 1)
            refresh = await new_job(kube, *seen, selector="captf.io/name=m1,captf.io/op=refresh")
            seen.append(refresh)
            await kube.finish(refresh, "succeeded", at=clock.now(), result=reading(health))
            if health == "stopped":
                await eventually(read_stopped, what="HealthWatched telling the stopped reading")
                assert REMEDIATE not in await machine_notes(kube)

        async def marked() -> bool:
            return REMEDIATE in await machine_notes(kube)

        await eventually(marked, what="the Machine marked at the terminated reading")
        [warning] = await events_of(kube, "RemediationRequested")
        assert warning["message"].startswith("a reading found the instance terminated")
        labels = {"namespace": namespace, "kind": MACHINE, "reason": "RemediationRequested"}
        assert registry.get_sample_value("captf_remediation_requests_total", labels) == 1.0


@pytest.mark.parametrize("threshold", [0, 101])
async def test_the_crd_refuses_a_threshold_outside_1_to_100(
    apiserver: ApiServer, namespace: str, threshold: int
) -> None:
    kube = Kube(apiserver, namespace)
    body = {
        "apiVersion": API_VERSION,
        "kind": MACHINE,
        "metadata": {"name": "m1"},
        "spec": {
            "source": {"configMapRef": {"name": "m1-module"}},
            "jobs": {"image": "captf:dev"},
            "health": {"unhealthyThreshold": threshold},
        },
    }
    with pytest.raises(RequestFailed) as refused:
        await kube.call("POST", kube.captf_path("terraformmachines"), body)
    assert refused.value.status == 422
