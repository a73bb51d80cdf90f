"""The controller on the real API server: what each runner outcome counts as.

A deadline kill is a counted failure even when the runner says `interrupted`;
a drain (the pod failure policy's FailJob) counts nothing and the next attempt
runs at once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.core.basics.timefmt import format_time, parse_time
from runtime.envtest import ApiServer
from tests.kube.harness import (
    controller_on,
    event_for,
    events_of,
    new_job,
    next_is,
    nth_job,
)

pytestmark = pytest.mark.kube


async def test_a_deadline_kill_counts_as_a_failure(apiserver: ApiServer, namespace: str) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        first = await nth_job(kube, 1)
        at = clock.now()
        await kube.finish(first, "interrupted", at=at, reason="DeadlineExceeded")
        event = await event_for(kube, first["metadata"]["name"], "JobDeadlineExceeded")
        assert event["type"] == "Warning"
        nxt = await next_is(kube, "InputsChangedBackoff")
        assert parse_time(nxt["at"]) == at + timedelta(minutes=1)
        status = (await kube.cluster())["status"]
        failure = status["failures"]["apply"]
        assert (failure["count"], failure["lastFailedAt"]) == (1, format_time(at))
        # The last failure's message, for `captf get`'s LAST ERROR once the Job is pruned.
        assert first["metadata"]["name"] in failure["message"]
        assert await events_of(kube, "JobInterrupted") == []
        await clock.advance(59)
        assert len(await kube.jobs()) == 1
        await clock.advance(1)
        second = await nth_job(kube, 2)
        assert second["metadata"]["annotations"]["captf.io/retry"] == "2"


async def test_a_drain_counts_nothing_and_retries_at_once(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        first = await nth_job(kube, 1)
        # Evicted before the runner could write a result: only the pod failure policy tells.
        await kube.finish(first, None, at=clock.now(), reason="PodFailurePolicy")
        event = await event_for(kube, first["metadata"]["name"], "JobInterrupted")
        assert event["type"] == "Normal"
        # No clock advance: the next attempt needs no delay, and keeps retry number 1.
        second = await nth_job(kube, 2)
        assert second["metadata"]["annotations"]["captf.io/retry"] == "1"
        status = (await kube.cluster())["status"]
        assert "failures" not in status
        assert await events_of(kube, "JobFailed") == []
        # An interrupted runner that did report `interrupted` (a drain it noticed) is the same.
        await clock.advance(5)  # it ran a while: it finished after the first
        await kube.finish(second, "interrupted", at=clock.now())
        await event_for(kube, second["metadata"]["name"], "JobInterrupted")
        third = await new_job(kube, first, second)
        assert third["metadata"]["annotations"]["captf.io/retry"] == "1"
        assert "failures" not in (await kube.cluster())["status"]
        # Pruning keeps the newest interrupted Job only.
        names = [j["metadata"]["name"] for j in await kube.jobs()]
        assert names == [second["metadata"]["name"], third["metadata"]["name"]]


async def test_a_drain_after_a_failure_keeps_the_retry_number(
    apiserver: ApiServer, namespace: str
) -> None:
    """One failure, its delay served, then a drain: the next apply runs at once, same retry."""
    async with controller_on(apiserver, namespace) as (kube, clock):
        first = await nth_job(kube, 1)
        await kube.finish(first, "failed", at=clock.now())
        await next_is(kube, "InputsChangedBackoff")
        await clock.advance(60)
        second = await nth_job(kube, 2)
        assert second["metadata"]["annotations"]["captf.io/retry"] == "2"
        await kube.finish(second, "interrupted", at=clock.now(), reason="PodFailurePolicy")
        third = await new_job(kube, first, second)
        assert third["metadata"]["annotations"]["captf.io/retry"] == "2"
        assert (await kube.cluster())["status"]["failures"]["apply"]["count"] == 1
