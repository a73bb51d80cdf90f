"""The controller on the real API server, with Secrets written before CAPTF labelled
the Secrets it writes: they are read the way the user's Secrets are (metadata cached,
data fetched), and decide as labelled ones do."""

from __future__ import annotations

import pytest

from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from tests.kube.harness import (
    Kube,
    condition_is,
    nth_job,
    running_controller,
    state_of,
    succeed_apply,
)

pytestmark = pytest.mark.kube


@pytest.mark.parametrize("labelled", [True, False], ids=["labelled", "older-unlabelled"])
async def test_a_state_secret_makes_the_object_ready_labelled_or_not(
    apiserver: ApiServer, namespace: str, labelled: bool
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace, clock=clock):
        applied = await nth_job(kube, 1)
        await succeed_apply(kube, applied, serial=1, at=clock.now(), labelled=labelled)
        await condition_is(kube, "Ready", "True", "Applied")
        state = await kube.secret(state_of(kube))
        assert ("captf.io/managed-by" in state["metadata"].get("labels", {})) == labelled
