"""The controller on the real API server: failures, the delay, and the tail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.core.basics.timefmt import format_time, parse_time
from runtime.envtest import ApiServer
from tests.kube.harness import (
    Kube,
    controller_on,
    eventually,
    next_is,
    nth_job,
    running_controller,
    write_state,
)

pytestmark = pytest.mark.kube


async def test_a_failed_apply_waits_one_minute(apiserver: ApiServer, namespace: str) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace):
        first = await nth_job(kube, 1)
        assert first["metadata"]["annotations"]["captf.io/retry"] == "1"
        failed_at = datetime.now(UTC).replace(microsecond=0)
        await kube.finish(first, "failed", at=failed_at)
        nxt = await next_is(kube, "InputsChangedBackoff")
        assert nxt["op"] == "apply"
        assert parse_time(nxt["at"]) == failed_at + timedelta(minutes=1)
        status = (await kube.cluster())["status"]
        failure = status["failures"]["apply"]
        assert (failure["count"], failure["lastFailedAt"]) == (1, format_time(failed_at))
        # The last failure's message, for `captf get`'s LAST ERROR once the Job is pruned.
        assert first["metadata"]["name"] in failure["message"]
        assert "activeJob" not in status
        assert len(await kube.jobs()) == 1


async def test_repeated_failures_follow_the_delay_table(
    apiserver: ApiServer, namespace: str
) -> None:
    """The seed's default row (limit 3): 1m, 2m, then the 10m cap, on a stepped clock."""
    async with controller_on(apiserver, namespace) as (kube, clock):
        for n, delay in [(1, 60), (2, 120), (3, 600), (4, 600)]:
            job = await nth_job(kube, n)
            assert job["metadata"]["annotations"]["captf.io/retry"] == str(n)
            at = clock.now()
            await kube.finish(job, "failed", at=at)
            await next_is(
                kube, "InputsChangedBackoff", at=format_time(at + timedelta(seconds=delay))
            )
            await clock.advance(delay - 1)
            assert len(await kube.jobs("captf.io/op=apply")) == min(n, 3)
            await clock.advance(1)
        obj = await kube.cluster()
        assert obj["metadata"]["labels"]["captf.io/retry-capped"] == "apply"
        assert obj["status"]["failures"]["apply"]["count"] == 3  # pruning keeps L = 3
        events = await kube.events()
        assert len([e for e in events if e["reason"] == "RetryCapped"]) == 1
        assert len([e for e in events if e["reason"] == "JobFailed"]) == 4
        # A success resets the count and clears the tail.
        fifth = await nth_job(kube, 4)
        assert fifth["metadata"]["annotations"]["captf.io/retry"] == "4"
        await write_state(kube, fifth, serial=1)
        await kube.finish(fifth, "succeeded", at=clock.now(), result={"stateSerial": 1})

        async def cleared() -> bool:
            o = await kube.cluster()
            labels = o["metadata"].get("labels") or {}
            return "captf.io/retry-capped" not in labels and not o["status"].get("failures")

        await eventually(cleared, what="the retry-capped label and failures cleared")
        status = (await kube.cluster())["status"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"
        assert status["appliedInputsHash"] == status["inputsHash"]
        assert len(await kube.jobs("captf.io/op=apply")) == 1  # the success; failures pruned
