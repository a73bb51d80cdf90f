"""The stretch gauges show the budget keys objects ask of now, and no other: a member
counted under `none` until Cluster API labels it with its cluster leaves no series."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from controller.core import Settings
from controller.core.basics.names import CLUSTER, LABEL_CLUSTER_NAME, POOL
from controller.core.spec.policy import RunnerPolicy
from controller.io.caches import Caches
from controller.io.stretcher import BackgroundMetrics, stretch_round
from runtime.clock import LoopClock
from tests.builders import NS, captf
from tests.fakeapi import FakeApi

FLEET = {"identityRef": {"kind": "TerraformClusterIdentity", "name": "fleet"}}


def _shown(registry: CollectorRegistry) -> Mapping[str, float]:
    return {
        sample.labels["identity"]: sample.value
        for family in registry.collect()
        if family.name == "captf_background_stretch"
        for sample in family.samples
    }


async def test_a_key_nothing_asks_of_any_more_leaves_the_gauges() -> None:
    server = FakeApi()
    caches = Caches(server, clock=LoopClock(), namespace=None)
    registry = CollectorRegistry()
    metrics = BackgroundMetrics(registry)
    settings = Settings(slot_namespace=NS, runner=RunnerPolicy())
    objects = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{NS}"
    await server.request("POST", f"{objects}/terraformclusters", body=captf(CLUSTER, spec=FLEET))
    unlabelled = captf(POOL, "pool", cluster=None)
    del unlabelled["spec"]["identityRef"]  # it reads the cloud through its cluster's
    pool = await server.request("POST", f"{objects}/terraformmachinepools", body=unlabelled)
    server.sync(caches)

    await stretch_round(server, caches, settings, metrics)
    assert set(_shown(registry)) == {"identity fleet", "none"}
    assert len(server.of("leases")) == 2  # each key's budget Lease

    pool["metadata"]["labels"] = {LABEL_CLUSTER_NAME: "c1"}  # as Cluster API labels it
    await server.request("PUT", f"{objects}/terraformmachinepools/pool", body=pool)
    server.sync(caches)
    await stretch_round(server, caches, settings, metrics)

    assert _shown(registry) == {"identity fleet": 1.0}
    for family in ("captf_background_demand_per_minute", "captf_background_budget_per_minute"):
        assert registry.get_sample_value(family, {"identity": "none"}) is None
        assert registry.get_sample_value(family, {"identity": "identity fleet"}) is not None
