"""The controller on the real API server: drift checks and the remediation cap.

With `failedJobsHistoryLimit: 2`, two failed remediation applies after one
drift check are the cap: nothing more remediates (DriftDetected stays True)
until the next drift check."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from controller.core.basics.timefmt import parse_time
from controller.core.decide.triggers import jitter
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    condition_is,
    controller_on,
    eventually,
    job_notes,
    new_job,
    next_is,
    nth_job,
    running_controller,
    succeed_apply,
)

pytestmark = pytest.mark.kube
HOUR = 3600
HOURLY = {"interval": "1h"}


async def test_remediation_stops_at_the_cap_until_the_next_drift_check(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    clock = SteppedClock()
    await kube.setup_cluster(
        drift={"interval": "1h", "remediate": True},
        jobs={"image": "captf:dev", "failedJobsHistoryLimit": 2},
    )
    async with running_controller(apiserver, namespace, clock=clock):
        applied = await nth_job(kube, 1)
        await succeed_apply(kube, applied, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        nxt = await next_is(kube, "Idle")
        # The check is due an hour on, plus the object's jitter (docs/decisions.md).
        late = jitter((await kube.cluster())["metadata"]["uid"], "drift", HOUR)
        _near(parse_time(nxt["at"]), clock.now() + timedelta(seconds=HOUR + late))
        await clock.advance(HOUR + late)

        check = await nth_job(kube, 1, "captf.io/op=drift")
        checked_at = clock.now()
        await kube.finish(check, "succeeded", at=checked_at, result={"drift": True})
        remediations: list[Json] = []
        for n, delay in [(1, 60), (2, 0)]:
            job = await new_job(kube, applied, *remediations)
            assert job_notes(job)["captf.io/drift-remediation"] == "true"
            assert job_notes(job)["captf.io/retry"] == str(n)
            remediations.append(job)
            await condition_is(kube, "DriftDetected", "True")
            await clock.advance(5)  # the remediation runs a while: it ends after the check
            await kube.finish(job, "failed", at=clock.now())
            if delay:
                await next_is(kube, "DriftRemediationBackoff")
                await clock.advance(delay)

        # At the cap: idle until the next drift check; drift stays detected; Ready stays True.
        nxt = await next_is(kube, "Idle")
        _near(parse_time(nxt["at"]), checked_at + timedelta(seconds=HOUR + late))
        drift = await condition_is(kube, "DriftDetected", "True")
        assert "remediation stopped" in drift["message"]
        await condition_is(kube, "Ready", "True")
        # Past the longest delay there is, still nothing: the cap, not a backoff, holds it.
        await clock.advance(600)

        async def idle_rechecked() -> bool:
            status = (await kube.cluster())["status"]
            return bool(
                status["next"]["reason"] == "Idle" and status["failures"]["apply"]["count"] == 2
            )

        await eventually(idle_rechecked, what="idle after the cap")
        assert len(await kube.jobs("captf.io/op=apply")) == 3
        assert (await kube.cluster())["metadata"]["labels"]["captf.io/retry-capped"] == "apply"

        # The next drift check that finds drift starts a new round of remediation.
        await clock.advance(HOUR + late - 600 - 10)
        second_check = await new_job(kube, check, selector="captf.io/op=drift")
        await kube.finish(second_check, "succeeded", at=clock.now(), result={"drift": True})
        again = await new_job(kube, applied, *remediations)
        assert job_notes(again)["captf.io/drift-remediation"] == "true"
        assert job_notes(again)["captf.io/retry"] == "3"


async def test_a_clean_drift_check_clears_drift(apiserver: ApiServer, namespace: str) -> None:
    """Without remediation, found drift only shows; a later check without drift clears it."""
    async with controller_on(apiserver, namespace, drift=HOURLY) as (kube, clock):
        applied = await nth_job(kube, 1)
        await succeed_apply(kube, applied, serial=1, at=clock.now())
        await next_is(kube, "Idle")
        late = jitter((await kube.cluster())["metadata"]["uid"], "drift", HOUR)
        await clock.advance(HOUR + late)
        check = await nth_job(kube, 1, "captf.io/op=drift")
        await kube.finish(check, "succeeded", at=clock.now(), result={"drift": True})
        await condition_is(kube, "DriftDetected", "True", "DriftDetected")
        await next_is(kube, "Idle")
        assert len(await kube.jobs("captf.io/op=apply")) == 1  # remediate is off
        await clock.advance(HOUR + late)
        second = await new_job(kube, check, selector="captf.io/op=drift")
        await kube.finish(second, "succeeded", at=clock.now(), result={"drift": False})
        await condition_is(kube, "DriftDetected", "False", "NoDrift")


def _near(got: datetime, want: datetime) -> None:
    """Equal within two seconds: status and Job times have one-second resolution, and the
    schedule counts from the check's finish time as the Job records it."""
    assert abs((got - want).total_seconds()) < 2, (got, want)
