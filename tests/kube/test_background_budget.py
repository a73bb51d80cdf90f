"""Changes first (issue 39), on the real API server: background Jobs (drift checks,
refreshes) hold at most their share of the run slots, and when a slot comes free while
a change waits beside them, the change takes it.

Two run slots, the default share (0.5): background Jobs may hold one, and never the last
free one. Three Ready clusters come due for their drift checks and refreshes at once: one
takes a slot, the other two wait `WaitingForBackgroundBudget`. A new cluster's apply (a
change) takes the other slot; a second new cluster waits `WaitingForRunLease`. The
background Job ends: its slot goes to the waiting change, not to a background Job that
waited longer (on main the two longest waiters are woken, both background, and one of
them takes it)."""

from __future__ import annotations

import pytest

from controller.core.basics.names import Reason
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    condition_is,
    eventually,
    next_is,
    nth_job,
    running_controller,
    succeed_apply,
)

pytestmark = pytest.mark.kube
HOURLY = {"interval": "1h"}
BACKGROUND = "captf.io/op%20in%20(drift,refresh)"  # a label selector, as a URL carries it


def _holder(lease: Json) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _slots(kube: Kube) -> dict[str, Json]:
    path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{kube.ns}/leases"
        "?labelSelector=captf.io/scope=run-slot"
    )
    found = (await kube.call("GET", path))["items"]
    return {lease["metadata"]["name"]: lease for lease in found}


async def _running(kube: Kube, selector: str) -> list[Json]:
    return [
        job
        for job in await kube.jobs(selector)
        if not any(
            c.get("status") == "True" for c in (job.get("status") or {}).get("conditions") or []
        )
    ]


async def test_a_change_takes_the_next_free_slot_while_background_jobs_wait(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    async with running_controller(apiserver, namespace, clock=clock, max_concurrent_runs=2):
        for name in ("c1", "c2", "c3"):
            await kube.setup_cluster(name, refresh=HOURLY)
            applied = await nth_job(kube, 1, f"captf.io/name={name}")
            await succeed_apply(kube, applied, serial=1, at=clock.now(), name=name)
            await condition_is(kube, "Ready", "True", name=name)

        # An hour on: every cluster's drift check and refresh are due. One background Job
        # takes a slot; the others wait for the share, not for a slot.
        await clock.advance(3600 * 1.1)

        async def one_background() -> bool:
            return len(await _running(kube, BACKGROUND)) == 1

        await eventually(one_background, what="one background Job")
        [first] = await _running(kube, BACKGROUND)
        busy = first["metadata"]["labels"]["captf.io/name"]
        waiting = [n for n in ("c1", "c2", "c3") if n != busy]
        for name in waiting:
            await next_is(kube, Reason.WAITING_FOR_BACKGROUND_BUDGET, name=name)
        slots = await _slots(kube)
        held = {_holder(s): s for s in slots.values() if _holder(s)}
        assert (
            held[first["metadata"]["name"]]["metadata"]["annotations"]["captf.io/holder-class"]
            == "background"
        )

        # A change comes: the free slot is its own, the background share being full.
        await kube.setup_cluster("c4")
        change = await nth_job(kube, 1, "captf.io/name=c4")
        assert (
            _holder((await _slots(kube))[_slot_of(await _slots(kube), change)])
            == (change["metadata"]["name"])
        )
        # A second change waits for a slot, beside the two background Jobs.
        await kube.setup_cluster("c5")
        await next_is(kube, Reason.WAITING_FOR_RUN_LEASE, name="c5")
        for name in waiting:
            await next_is(kube, Reason.WAITING_FOR_BACKGROUND_BUDGET, name=name)

        # The background Job ends: its slot goes to c5's apply, not to c2's or c3's
        # background Jobs, which waited longer.
        await kube.finish(first, "succeeded", at=clock.now())
        taken = await nth_job(kube, 1, "captf.io/name=c5")
        assert (
            _holder((await _slots(kube))[_slot_of(await _slots(kube), taken)])
            == (taken["metadata"]["name"])
        )
        assert len(await _running(kube, BACKGROUND)) == 0
        for name in waiting:
            await next_is(kube, Reason.WAITING_FOR_BACKGROUND_BUDGET, name=name)
            assert await _running(kube, f"captf.io/name={name},{BACKGROUND}") == []

        # The changes end: the background Jobs run again, one at a time (never in the
        # last free slot: with one change still running, none starts).
        await succeed_apply(kube, change, serial=1, at=clock.now(), name="c4")
        await condition_is(kube, "Ready", "True", name="c4")
        assert await _running(kube, BACKGROUND) == []
        await succeed_apply(kube, taken, serial=1, at=clock.now(), name="c5")
        await eventually(one_background, what="a background Job once the changes are done")


def _slot_of(slots: dict[str, Json], job: Json) -> str:
    return next(name for name, s in slots.items() if _holder(s) == job["metadata"]["name"])
