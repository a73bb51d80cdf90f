"""A module image lookup is a step of the plan that asks for it, carried out before any of
that plan's writes, and the object comes back at once: its next pass has the answer,
and only that pass's writes are made. So a found image's Job starts in the pass after
the one that asked, and the status never shows `ImageResolving` for a lookup that
answered. A failed answer waits, and the Run after the wait asks the registry again.

The registry is the controller's own ImageRegistry (its cache, its asked/peeked
marking) with the crane call replaced by a table of answers: the crane protocol runs
for real in tests/kube/test_registry_lookup.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.core import ImageFact, Resolved, Unresolved, plan_pass
from controller.core.basics.names import CLUSTER, Reason
from controller.core.basics.timefmt import format_time
from controller.core.decide.pinning import IMAGE_WAITS
from controller.core.decide.settings import Settings
from controller.core.spec.policy import RunnerPolicy
from controller.io import api, reconciler
from controller.io.accountant import JobMetrics
from controller.io.caches import Caches
from controller.io.keys import key_of
from controller.io.reconciler import Reconciler
from controller.io.registry import ImageRegistry
from runtime.clock import SteppedClock
from runtime.jsonobj import Json
from runtime.loop import Result
from tests.builders import NOW, NS, captf, owners_of, secret
from tests.fakeapi import FakeApi
from tests.unit.io.test_reconcile_replay import Runner

REF = "reg.local/team/mod:1"
D1 = "sha256:" + "1" * 64
FOUND = Resolved(REF, D1, size=1000, role="cluster")
MISSING = Unresolved(REF, Reason.IMAGE_NOT_FOUND, f"registry reg.local has no image {REF}")


@dataclass
class TableRegistry(ImageRegistry):
    """The controller's registry whose registry answers from `answers`, in turn, for
    `reference` only."""

    answers: list[ImageFact] = field(default_factory=list)
    asked: int = 0
    reference: str = REF

    async def _ask(self, reference: str, auths: Json) -> ImageFact:
        assert reference == self.reference
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]


@dataclass
class World:
    fake: FakeApi
    clock: SteppedClock
    caches: Caches
    registry: TableRegistry
    reconciler: Reconciler
    plans: list[object] = field(default_factory=list)

    async def reconcile(self) -> Result:
        self.fake.clock_text = format_time(self.clock.now())
        self.fake.sync(self.caches)
        return await self.reconciler.reconcile(key_of(CLUSTER, NS, "c1"))

    async def passes(self) -> Result:
        """A pass, and the one its immediate requeue brings at once (a lookup's answer's),
        as the queue runs them."""
        result = await self.reconcile()
        if result.requeue_after == 0.0:
            result = await self.reconcile()
        return result

    async def until_due(self) -> None:
        """Passes, time moving as each asks (the drift check's schedule is jittered),
        until one's plan asks for a lookup."""
        asked = self.registry.asked
        for _ in range(5):
            waits = (await self.passes()).requeue_after
            if self.registry.asked > asked:
                return
            await self.clock.advance(waits or 1.0)
        raise AssertionError("no lookup asked for")

    async def settle(self) -> None:
        """Passes, every Job run to success, until a pass writes nothing."""
        for _ in range(10):
            before = len(self.fake.writes)
            at_once = (await self.reconcile()).requeue_after == 0.0
            ran = Runner().finish_running(self.fake)
            if len(self.fake.writes) == before and not ran and not at_once:
                return
            await self.clock.advance(1.0)
        raise AssertionError(f"no rest: {self.fake.writes}")


def _world(answers: list[ImageFact], monkeypatch: pytest.MonkeyPatch) -> World:
    fake = FakeApi()
    fake.create(api.secret_path(NS), secret("creds", {"token": "t"}))
    spec: Json = {"source": {"image": REF, "configMapRef": None}, "drift": {"interval": "1h"}}
    obj = captf(CLUSTER, "c1", spec=spec)
    fake.create(api.object_path(CLUSTER, NS, "c1").rsplit("/", 1)[0], obj)
    for owner in owners_of(obj):
        fake.create(api.resource_path(api.CAPI_OBJECTS[owner["kind"]], NS), owner)
    clock = SteppedClock(NOW)
    caches = Caches(fake, clock=clock, namespace=NS)
    registry = TableRegistry(clock, answers=answers)
    reconciles = Reconciler(
        client=fake,
        caches=caches,
        clock=clock,
        metrics=JobMetrics(CollectorRegistry()),
        settings=Settings(slot_namespace=NS, runner=RunnerPolicy()),
        registry=registry,
    )
    world = World(fake, clock, caches, registry, reconciles)
    # Every pass's plans, as the reconciler makes them: one per pass.
    real = plan_pass

    def counted(*args: Any, **kwargs: Any) -> Any:
        todo = real(*args, **kwargs)
        world.plans.append(todo)
        return todo

    monkeypatch.setattr(reconciler, "plan_pass", counted)
    return world


def _cluster(world: World) -> Json:
    [obj] = world.fake.collection(_prefix()).values()
    return obj


def _prefix() -> str:
    return api.object_path(CLUSTER, NS, "c1").rsplit("/", 1)[0]


def _image_volume(job: Json) -> str:
    pod = job["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "image" in v]
    return str(volume["image"]["reference"])


def _condition(obj: Json, kind: str) -> Json | None:
    found = [c for c in obj["status"].get("conditions") or [] if c["type"] == kind]
    return found[0] if found else None


def _status_writes(world: World) -> int:
    return sum(1 for method, path in world.fake.writes if path.endswith("/status"))


async def test_the_lookup_comes_alone_and_the_next_pass_at_once_runs_its_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _world([FOUND], monkeypatch)

    asked = await world.reconcile()
    assert (len(world.plans), asked.requeue_after) == (1, 0.0)  # the lookup; back at once
    assert world.fake.writes == []  # none of that plan's writes
    await world.reconcile()
    assert len(world.plans) == 2  # the plan that asked, then the next pass's
    assert world.registry.asked == 1  # that plan's lookup; the next pass's is its answer
    [job] = world.fake.of("jobs")
    assert _image_volume(job) == f"reg.local/team/mod@{D1}"
    resolved = _condition(_cluster(world), "ImageResolved")
    assert resolved is not None
    assert resolved["status"] == "True"
    # The first plan wrote nothing: no status ever said ImageResolving.
    assert world.plans[0].image_lookup is not None  # type: ignore[attr-defined]
    assert _status_writes(world) == 1
    assert _cluster(world)["status"]["next"]["reason"] != Reason.IMAGE_RESOLVING


async def test_a_failed_answer_waits_and_the_run_after_the_wait_asks_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _world([MISSING, FOUND], monkeypatch)

    waited = await world.passes()
    assert waited.requeue_after == IMAGE_WAITS[Reason.IMAGE_NOT_FOUND]
    assert world.fake.of("jobs") == []
    failed = _condition(_cluster(world), "ImageResolved")
    assert failed is not None
    assert (failed["status"], failed["reason"]) == ("False", Reason.IMAGE_NOT_FOUND)
    assert (await world.reconcile()).requeue_after is not None  # woken: no new lookup
    assert world.registry.asked == 1

    await world.clock.advance(IMAGE_WAITS[Reason.IMAGE_NOT_FOUND])
    # The failure is forgotten by then: the Run asks again, and runs the answer.
    await world.passes()
    assert world.registry.asked == 2
    [job] = world.fake.of("jobs")
    assert _image_volume(job) == f"reg.local/team/mod@{D1}"


async def test_a_drift_checks_failed_lookup_waits_and_asks_again_after_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _world([FOUND, MISSING, MISSING], monkeypatch)
    await world.settle()  # applied with D1
    assert world.registry.asked == 1
    assert len(world.fake.of("jobs")) == 1

    # The drift check resolves the tag again: the registry has lost it.
    await world.clock.advance(3600.0)
    await world.until_due()
    assert world.registry.asked == 2
    failed = _condition(_cluster(world), "ImageResolved")
    assert failed is not None
    assert (failed["status"], failed["reason"]) == ("False", Reason.IMAGE_NOT_FOUND)

    # After the wait the drift check asks again, and the answer says the same.
    await world.clock.advance(IMAGE_WAITS[Reason.IMAGE_NOT_FOUND])
    assert (await world.passes()).requeue_after == IMAGE_WAITS[Reason.IMAGE_NOT_FOUND]
    assert world.registry.asked == 3
    assert _condition(_cluster(world), "ImageResolved") == failed
    assert len(world.fake.of("jobs")) == 1
