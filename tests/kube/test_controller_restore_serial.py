"""The controller on the real API server: a restore annotation that names no serial.

The API server stores any text in `captf.io/restore-serial` (`kubectl annotate ...
captf.io/restore-serial=` stores ""). No restore runs for it, and the rest of DecideOp
goes on; the operator learns why from one Warning Event and the Waiting condition."""

from __future__ import annotations

import pytest

from runtime.envtest import ApiServer
from tests.kube.harness import (
    condition_is,
    controller_on,
    events_of,
    eventually,
    nth_job,
    succeed_apply,
)

pytestmark = pytest.mark.kube
MERGE = "application/merge-patch+json"
CLUSTERS = "terraformclusters"
NOTE = "captf.io/restore-serial={value!r} is not a state serial (decimal digits): no restore runs"


async def test_an_unusable_restore_serial_warns_once_and_shows_in_the_condition(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        await succeed_apply(kube, await nth_job(kube, 1), serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")

        await kube.annotate(CLUSTERS, "c1", {"captf.io/restore-serial": "abc"})

        async def noted() -> dict[str, str] | None:
            waiting = await condition_is(kube, "Waiting", "False", "Idle")
            return waiting if NOTE.format(value="abc") in waiting["message"] else None

        await eventually(noted, what="the Waiting condition naming the annotation")
        [warning] = await events_of(kube, "RestoreSerialInvalid")
        assert warning["type"] == "Warning"
        assert warning["message"] == NOTE.format(value="abc")
        assert warning["involvedObject"]["name"] == "c1"

        # Later passes record it no more: each spec change below is a pass, seen when the
        # status reports its generation.
        for hours in (1, 2, 3):
            obj = await kube.call(
                "PATCH",
                kube.captf_path(CLUSTERS, "c1"),
                {"spec": {"refresh": {"interval": f"{hours}h"}}},
                MERGE,
            )
            generation = obj["metadata"]["generation"]

            async def observed(generation: int = generation) -> bool:
                status = (await kube.cluster()).get("status") or {}
                return bool(status.get("observedGeneration") == generation)

            await eventually(observed, what=f"generation {generation} observed")
        assert len(await events_of(kube, "RestoreSerialInvalid")) == 1
        assert await kube.jobs("captf.io/op=restore") == []

        # Another unusable value is another Warning; a serial ends the note and restores.
        await kube.annotate(CLUSTERS, "c1", {"captf.io/restore-serial": ""})

        async def second() -> bool:
            return len(await events_of(kube, "RestoreSerialInvalid")) == 2

        await eventually(second, what="a Warning for the empty value")
        await kube.annotate(CLUSTERS, "c1", {"captf.io/restore-serial": "1"})
        await nth_job(kube, 1, "captf.io/op=restore")
        waiting = await condition_is(kube, "Waiting", "True", "JobRunning")
        assert "restore-serial" not in waiting["message"]
