"""The controller on the real API server: an apply Job deleted while it ran.

The deleted apply may have applied part of its change, so an apply of the
current inputs stays due even when the state already records those inputs
(the runner may have written the state before it was killed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    condition_is,
    eventually,
    job_env,
    new_job,
    nth_job,
    running_controller,
    succeed_apply,
    write_state,
)

pytestmark = pytest.mark.kube
MESSAGE = (
    "Job {job}: disappeared while it ran and may have applied part of its change; "
    "an apply of the current inputs is due"
)


def _inputs_secret(job: Json) -> str:
    return job_env(job)["CAPTF_INPUTS_SECRET"]


@pytest.mark.parametrize("skew", [0, 600, -600], ids=["same-time", "ahead", "behind"])
async def test_an_apply_deleted_mid_run_is_applied_again(
    apiserver: ApiServer, namespace: str, skew: int
) -> None:
    """`skew`: how far the controller's clock is from the API server's (under --time-scale
    it runs ahead); the record must end all the same."""
    kube = Kube(apiserver, namespace)
    clock = SteppedClock(datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=skew))
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        first = await nth_job(kube, 1)
        name = first["metadata"]["name"]

        async def active() -> bool:
            return bool((await kube.cluster()).get("status", {}).get("activeJob") == name)

        await eventually(active, what="status.activeJob names the apply")
        # The runner got as far as writing the state with the current inputs, then the Job
        # was deleted (no status: it never finished).
        await write_state(kube, first, serial=1)
        await kube.delete_job(name)

        async def recorded() -> str | None:
            notes = (await kube.secret(_inputs_secret(first)))["metadata"].get("annotations")
            return (notes or {}).get("captf.io/interrupted-apply")

        assert await eventually(recorded, what="the interrupted apply recorded") == name
        cond = await condition_is(kube, "ApplyJobSucceeded", "False", "ApplyFailed")
        assert cond["message"] == MESSAGE.format(job=name)
        second = await new_job(kube, first)
        assert second["metadata"]["annotations"]["captf.io/guarded"] == "true"
        assert second["metadata"]["annotations"]["captf.io/retry"] == "1"  # counts nothing
        # The inputs equal the state's, yet the object is not Ready: the interrupted apply
        # is why.
        ready = await condition_is(kube, "Ready", "False", "InterruptedApply")
        assert ready["message"]
        status = (await kube.cluster())["status"]
        assert status["appliedInputsHash"] == status["inputsHash"]
        assert "failures" not in status

        await succeed_apply(kube, second, serial=2, at=clock.now())
        await condition_is(kube, "ApplyJobSucceeded", "True", "ApplySucceeded")
        await condition_is(kube, "Ready", "True", "Applied")
        assert await eventually(lambda: _cleared(kube, first), what="the record cleared")
        assert len(await kube.jobs()) == 1


async def _cleared(kube: Kube, first: Json) -> bool:
    notes = (await kube.secret(_inputs_secret(first)))["metadata"].get("annotations") or {}
    return "captf.io/interrupted-apply" not in notes
