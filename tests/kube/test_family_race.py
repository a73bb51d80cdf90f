"""A cluster and its members racing for their Jobs, on the real API server.

A cluster and two pools share a module and a refresh schedule, so each virtual
hour all three are due at the same moment. Their reconciles run as concurrent
tasks (as the controller's workers do), each after a small random delay, from
caches that may or may not have seen the others' Leases yet. Whatever the
interleaving, a cluster Job and a member Job never run at the same time; the
pools may run together. Every round some Job starts, and at the end every Lease
is free."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator

import anyio
import pytest
from prometheus_client import CollectorRegistry

from controller.core.basics.names import (
    CLUSTER,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_OP,
    POOL,
    state_secret_name,
)
from controller.core.decide.settings import Settings
from controller.core.jobs.job import is_finished
from controller.core.leases import family
from controller.core.spec.policy import RunnerPolicy
from controller.io.accountant import JobMetrics
from controller.io.caches import Caches
from controller.io.keys import key_of
from controller.io.reconciler import Reconciler
from runtime.clock import LoopClock, SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import Kube, eventually, succeed_apply

pytestmark = pytest.mark.kube
ROUNDS = 25
HOURLY = {"interval": "1h"}
POOLS = ("p1", "p2")
MAX_JITTER = 0.03  # seconds before each racing reconcile starts


@contextlib.asynccontextmanager
async def reconciler_on(
    server: ApiServer, namespace: str, clock: SteppedClock
) -> AsyncIterator[tuple[Reconciler, Caches]]:
    """The controller's reconciler and caches, without its work queue: the test decides
    which reconciles run, and when."""
    async with open_transport(str(server.kubeconfig)) as transport:
        caches = Caches(transport, clock=LoopClock(), namespace=namespace)
        reconciler = Reconciler(
            client=transport,
            caches=caches,
            clock=clock,
            metrics=JobMetrics(CollectorRegistry()),
            settings=Settings(
                max_concurrent_runs=10, slot_namespace=namespace, runner=RunnerPolicy()
            ),
        )
        async with anyio.create_task_group() as tg:
            for informer in caches.informers():
                tg.start_soon(informer.run)
            for informer in caches.informers():
                await informer.wait_synced()
            try:
                yield reconciler, caches
            finally:
                tg.cancel_scope.cancel()


async def _create_pool(kube: Kube, name: str) -> None:
    body = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": POOL,
        "metadata": {"name": name},
        "spec": {
            "source": {"configMapRef": {"name": "c1-module"}},  # the cluster's, shared
            "variables": {"size": 2},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"},
            "refresh": HOURLY,
        },
    }
    await kube.create_member(body)


def _running(jobs: list[Json]) -> list[Json]:
    return [job for job in jobs if not is_finished(job)]


def _overlaps(running: list[Json]) -> bool:
    kinds = [job["metadata"]["labels"][LABEL_KIND] for job in running]
    return CLUSTER in kinds and len(kinds) > kinds.count(CLUSTER)


class Race:
    def __init__(
        self, kube: Kube, reconciler: Reconciler, caches: Caches, clock: SteppedClock
    ) -> None:
        self.kube, self.reconciler, self.caches, self.clock = kube, reconciler, caches, clock
        self.keys = [key_of(CLUSTER, kube.ns, "c1")] + [key_of(POOL, kube.ns, p) for p in POOLS]
        self.overlaps: list[list[str]] = []
        self.serial = 0

    async def check(self) -> list[Json]:
        running = _running(await self.kube.jobs())
        if _overlaps(running):
            self.overlaps.append(sorted(job["metadata"]["name"] for job in running))
        return running

    async def race(self, rng: random.Random) -> list[Json]:
        async def one(key: str) -> None:
            await asyncio.sleep(rng.uniform(0, MAX_JITTER))
            await self.reconciler.reconcile(key)

        async with anyio.create_task_group() as tg:
            for key in self.keys:
                tg.start_soon(one, key)
        return await self.check()

    async def settle(self) -> None:
        """Finishes every running Job and reconciles until nothing more starts: the losers
        of a race start once the winner's Job is accounted."""
        for _ in range(10):
            running = await self.check()
            if not running:
                return
            for job in running:
                await self._succeed(job)
            await self._caches_show_finished(running)
            for key in self.keys:
                await self.reconciler.reconcile(key)
        raise AssertionError("Jobs kept starting")

    async def _succeed(self, job: Json) -> None:
        labels = job["metadata"]["labels"]
        if labels[LABEL_OP] == "apply":
            self.serial += 1
            await succeed_apply(
                self.kube, job, serial=self.serial, at=self.clock.now(), name=labels[LABEL_NAME]
            )
        else:
            await self.kube.finish(job, "succeeded", at=self.clock.now())

    async def _caches_show_finished(self, jobs: list[Json]) -> None:
        applied = {
            (job["metadata"]["labels"][LABEL_KIND], job["metadata"]["labels"][LABEL_NAME])
            for job in jobs
            if job["metadata"]["labels"][LABEL_OP] == "apply"
        }

        async def shown() -> bool:
            for job in jobs:
                cached = self.caches.job(self.kube.ns, job["metadata"]["name"])
                if cached is None or not is_finished(cached):
                    return False
            states = self.caches.own_secrets.store
            return all(
                f"{self.kube.ns}/{state_secret_name(self.kube.ns, kind, name)}" in states
                for kind, name in applied
            )

        await eventually(shown, what="the caches to show the finished Jobs")


async def test_a_cluster_and_its_members_never_run_at_once(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster("c1", refresh=HOURLY)
    for pool in POOLS:
        await _create_pool(kube, pool)
    async with reconciler_on(apiserver, namespace, clock) as (reconciler, caches):
        race = Race(kube, reconciler, caches, clock)

        async def all_cached() -> bool:
            return all(caches.object(*k.split("/", 2)) is not None for k in race.keys)

        await eventually(all_cached, what="the objects in the cache")

        async def applied() -> bool:
            # First applies: the cluster's, then (once the cache shows it Ready) the pools'.
            for key in race.keys:
                await reconciler.reconcile(key)
            await race.settle()
            return len(await kube.jobs("captf.io/op=apply")) == 3

        await eventually(applied, what="the first applies")

        rng = random.Random(11)
        for _ in range(ROUNDS):
            await clock.advance(3600 * 1.1)  # the interval, past any jitter (a tenth at most)
            started = await race.race(rng)
            assert started, "a round in which nobody started: the test races nothing"
            await race.settle()

        assert race.overlaps == []
        leases = await kube.call(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        )
        for lease in leases["items"]:
            assert family.holder_of(lease) == "", lease
            assert family.member_jobs(lease) == {}, lease
