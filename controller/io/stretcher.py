"""Keeping each set of credentials' stretch on its budget Lease (issue 39).

Every STRETCH_EVERY seconds of controller time the leader reckons, from its caches, what
the schedules of every object ask of each set of credentials, and the stretch that
keeps that within its budget (controller/core/leases/budget_demand.py, pure); writes the
stretch on the credentials' budget Lease when it changed (a read-modify-write with the
cached version as precondition: a 409 waits for the next round), and exports it:
`captf_background_stretch{identity}`, with the demand and the budget a minute beside it.
The objects' schedules read the stretch back from the Lease, so `captf decide` sees what
the controller does, and a restarted controller starts from the last one written."""

from __future__ import annotations

import logging
from typing import Final

from prometheus_client import CollectorRegistry, Gauge

from controller.core import LEASE_API, Settings, budget_lease, stretches
from controller.io import api
from controller.io.api import Api
from controller.io.caches import Caches
from runtime.clock import Clock
from runtime.errors import ApiError

log = logging.getLogger(__name__)

STRETCH_EVERY: Final = 60.0


class BackgroundMetrics:
    """The gauges of each set of credentials' budget (label `identity`: the budget key,
    `identity NAME` or `secret NAMESPACE/NAME`)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.stretch = Gauge(
            "captf_background_stretch",
            "The factor the background schedules of the objects of a set of credentials are"
            " stretched by to keep within its budget (1: not stretched)",
            ["identity"],
            registry=registry,
        )
        self.demand = Gauge(
            "captf_background_demand_per_minute",
            "Background Jobs a minute the schedules of the objects of a set of credentials"
            " ask for, unstretched",
            ["identity"],
            registry=registry,
        )
        self.budget = Gauge(
            "captf_background_budget_per_minute",
            "Background Jobs a set of credentials may start a minute",
            ["identity"],
            registry=registry,
        )
        self.shown: set[str] = set()

    def show(self, key: str, stretch: float, demand: float, budget: int) -> None:
        self.stretch.labels(key).set(stretch)
        self.demand.labels(key).set(demand)
        self.budget.labels(key).set(budget)
        self.shown.add(key)

    def forget_all_but(self, keys: set[str]) -> None:
        """Drop the series of keys no object asks of any more (a member counted under
        `none` until Cluster API labels it with its cluster, credentials no longer used):
        a gauge left behind would report a stretch nothing has."""
        for key in self.shown - keys:
            for gauge in (self.stretch, self.demand, self.budget):
                gauge.remove(key)
        self.shown &= keys


async def stretch_forever(
    client: Api, caches: Caches, clock: Clock, settings: Settings, metrics: BackgroundMetrics
) -> None:
    """A round every STRETCH_EVERY seconds, the first at once. A failed round is logged
    and the next tries again."""
    while True:
        try:
            await stretch_round(client, caches, settings, metrics)
        except Exception as err:
            log.warning("background stretch round failed: %s", err)
        await clock.sleep(STRETCH_EVERY)


async def stretch_round(
    client: Api, caches: Caches, settings: Settings, metrics: BackgroundMetrics
) -> None:
    objects = [obj for found in caches.by_kind().values() for obj in found]
    identities = {str(i["metadata"]["name"]): i for i in caches.identities.store}
    namespace = settings.slot_namespace
    leases = caches.all_leases()
    found = stretches(objects, identities, settings.background_jobs_per_minute)
    metrics.forget_all_but(set(found))
    for key, (stretch, demand, budget) in found.items():
        metrics.show(key, stretch, demand, budget)
        live = budget_lease.find(leases, namespace, key)
        body = budget_lease.with_stretch(live, namespace=namespace, key=key, stretch=stretch)
        if body is None:
            continue
        try:
            if live is None:
                await api.create(client, api.lease_path(namespace), LEASE_API | body)
            else:
                path = api.lease_path(namespace, str(body["metadata"]["name"]))
                await client.request("PUT", path, body=LEASE_API | body)
        except ApiError as err:
            if err.status != 409:
                raise
            log.info("budget Lease of %s changed meanwhile; next round", key)
