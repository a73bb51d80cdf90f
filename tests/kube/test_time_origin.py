"""The scaled timeline's origin, recorded once in the real API server and read by all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from runtime.envtest import ApiServer
from runtime.timeorigin import OriginError, scaled_clock, shared_origin
from runtime.transport import open_transport

pytestmark = pytest.mark.kube
T0 = datetime.now(UTC) - timedelta(hours=1)  # an origin an hour back


async def test_the_first_process_records_the_origin_and_every_other_reads_it(
    apiserver: ApiServer, namespace: str
) -> None:
    found: list[datetime] = []
    async with open_transport(str(apiserver.kubeconfig)) as api:

        async def one(offset: int) -> None:
            found.append(
                await shared_origin(api, namespace, "origin", T0 + timedelta(seconds=offset))
            )

        async with anyio.create_task_group() as tg:  # racing creators
            for offset in range(4):
                tg.start_soon(one, offset)
        assert len(set(found)) == 1
        # A process started a day later (a restart) still reads the first origin.
        later = await shared_origin(api, namespace, "origin", T0 + timedelta(days=1))
        assert later == found[0]

        # The recorded origin lies in the past: at 30x, the timeline is ahead of the wall
        # clock by 29 times the wall time since the origin (however long the run took to
        # get here), give or take the few seconds between the two readings.
        clock = await scaled_clock(api, namespace, "origin", 30)
        wall = datetime.now(UTC)
        ahead = clock.now() - wall
        expected = 29 * (wall - found[0])
        assert expected > timedelta(hours=28)
        assert abs(ahead - expected) < timedelta(minutes=2)

        # At scale 1 nothing is recorded: the wall clock is the timeline.
        unscaled = await scaled_clock(api, namespace, "other", 1.0)
        assert abs((unscaled.now() - datetime.now(UTC)).total_seconds()) < 60
        listed = await api.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
        assert [c["metadata"]["name"] for c in listed["items"]] == ["origin"]


async def test_a_mangled_origin_is_reported(apiserver: ApiServer, namespace: str) -> None:
    async with open_transport(str(apiserver.kubeconfig)) as api:
        body = {"metadata": {"name": "origin"}, "data": {"origin": "soon"}}
        await api.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)
        with pytest.raises(OriginError, match="origin 'soon' is not a time"):
            await shared_origin(api, namespace, "origin", T0)
