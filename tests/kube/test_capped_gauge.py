"""The metrics the alerts read, on the real API server: the retry-capped gauge follows the
label through the caches; the leader gauge says who leads."""

from __future__ import annotations

import anyio
import pytest
from prometheus_client import CollectorRegistry

from controller.io import capped
from controller.io.caches import Caches
from controller.io.main import serve
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.transport import open_transport
from tests.kube.harness import Kube, controller_args, eventually

pytestmark = pytest.mark.kube


async def test_the_gauge_counts_what_the_label_selects(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster("a")
    await kube.setup_cluster("b")
    registry = CollectorRegistry()

    def sample() -> float | None:
        labels = {"namespace": namespace, "kind": "TerraformCluster", "op": "apply"}
        return registry.get_sample_value(capped.NAME, labels)

    async with open_transport(str(apiserver.kubeconfig)) as transport:
        caches = Caches(transport, clock=LoopClock(), namespace=namespace)
        capped.register(registry, caches)
        async with anyio.create_task_group() as tg:
            for informer in caches.informers():
                tg.start_soon(informer.run)
            for informer in caches.informers():
                await informer.wait_synced()
            assert sample() is None  # no series while nothing is capped

            for name in ("a", "b"):
                await kube.call(
                    "PATCH",
                    kube.captf_path("terraformclusters", name),
                    {"metadata": {"labels": {"captf.io/retry-capped": "apply"}}},
                    "application/merge-patch+json",
                )

            async def two() -> bool:
                return sample() == 2

            await eventually(two, what="two capped clusters in the gauge")
            await kube.call(
                "PATCH",
                kube.captf_path("terraformclusters", "a"),
                {"metadata": {"labels": {"captf.io/retry-capped": None}}},
                "application/merge-patch+json",
            )

            async def one() -> bool:
                return sample() == 1

            await eventually(one, what="the cleared label gone from the gauge")
            tg.cancel_scope.cancel()


async def test_a_leading_replica_reports_it(apiserver: ApiServer, namespace: str) -> None:
    """leader_election_master_status is 1 once the controller leads (the alerts on leader
    changes and on no leader read it)."""
    registry = CollectorRegistry()
    started = anyio.Event()
    args = controller_args(apiserver, namespace, leader_elect=True, leader_election_id="lead")
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve, args, started, None, None, registry)
        with anyio.fail_after(60):
            await started.wait()
        labels = {"name": "lead"}
        assert registry.get_sample_value("leader_election_master_status", labels) == 1
        tg.cancel_scope.cancel()
