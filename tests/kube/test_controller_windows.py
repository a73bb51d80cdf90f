"""The controller on the real API server: a retry whose backoff outlasts its change
window shows the missed window in status until the retry runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.core.basics.timefmt import format_time
from runtime.envtest import ApiServer
from tests.kube.harness import controller_on, eventually, next_is, nth_job

pytestmark = pytest.mark.kube


async def test_a_missed_window_stays_in_status_until_the_retry_runs(
    apiserver: ApiServer, namespace: str
) -> None:
    # Opened a minute or two ago, closes in three to four minutes (the clock starts now).
    opens = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    window = {"start": opens.strftime("%H:%M"), "duration": "5m"}
    missed = {
        "op": "apply",
        "opens": format_time(opens),
        "closes": format_time(opens + timedelta(minutes=5)),
    }
    async with controller_on(
        apiserver, namespace, changeWindows=[window], jobs={"failedJobsHistoryLimit": 1}
    ) as (kube, clock):
        first = await nth_job(kube, 1)
        failed_at = clock.now()
        await kube.finish(first, "failed", at=failed_at)
        # Limit 1: the cap (10 min) at once, long after the window closes.
        await next_is(
            kube, "InputsChangedBackoff", at=format_time(failed_at + timedelta(minutes=10))
        )
        assert (await kube.cluster())["status"]["missedWindow"] == missed

        await clock.advance(6 * 60)  # the window has closed; the backoff still holds
        await clock.advance(5 * 60)  # the backoff is over; the next window is tomorrow
        nxt = await next_is(kube, "OutsideChangeWindow")
        assert nxt["op"] == "apply"
        assert (await kube.cluster())["status"]["missedWindow"] == missed
        assert len(await kube.jobs("captf.io/op=apply")) == 1

        await clock.advance(24 * 3600 - 11 * 60)  # the window opens again: the retry runs
        second = await nth_job(kube, 2)
        assert second["metadata"]["annotations"]["captf.io/retry"] == "2"

        async def cleared() -> bool:
            return "missedWindow" not in (await kube.cluster())["status"]

        await eventually(cleared, what="status.missedWindow cleared once the retry runs")
