"""A template's reconcile (controller/io/templates.py) enters the core once and carries out
once: the image lookup the core says it needs (`template_lookup`) is gathered first, as a
fact, then the one pass (`template_pass`) plans with the answer. A template whose status
already shows its image asks the registry nothing; a failed lookup is retried on the
pass's schedule, one lookup and one pass a reconcile.

The registry is the controller's own ImageRegistry (its cache, its flights) with the
registry's answer replaced by a table: the protocol runs for real in
tests/kube/test_template_capacity.py."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from controller.core import ImageFact, Resolved, Unresolved, template_pass
from controller.core.basics.names import GROUP, MACHINE_TEMPLATE, TEMPLATE_PLURALS, VERSION
from controller.core.basics.timefmt import format_time
from controller.io import api, templates
from controller.io.caches import Caches
from controller.io.templates import TemplateKeeper
from runtime.cache.resource import Resource
from runtime.clock import SteppedClock
from runtime.jsonobj import Json
from runtime.loop import Result
from tests.builders import NOW, NS
from tests.fakeapi import FakeApi
from tests.unit.io.test_image_lookup_pass import TableRegistry

IMAGE = "reg.local/team/machine:1"
FOUND = Resolved(
    IMAGE,
    "sha256:" + "1" * 64,
    1000,
    "machine",
    capacity='{"cpu":"4","memory":"16Gi"}',
    node_info='{"architecture":"amd64","operatingSystem":"linux"}',
)
MISSING = Unresolved(IMAGE, "ImageNotFound", f"registry reg.local has no image {IMAGE}")


@dataclass
class World:
    fake: FakeApi
    clock: SteppedClock
    caches: Caches
    registry: TableRegistry
    keeper: TemplateKeeper
    passes: int = 0  # entries into the core's template pass

    async def reconcile(self) -> Result:
        self.fake.clock_text = format_time(self.clock.now())
        # FakeApi.sync fills the CAPTF objects' caches; the templates' are filled here.
        self.caches.templates[MACHINE_TEMPLATE].store.replace(self.fake.of(PLURAL), "1")
        return await self.keeper.reconcile(MACHINE_TEMPLATE, NS, "t1")

    def status(self) -> Json:
        [obj] = self.fake.of(PLURAL)
        return dict(obj.get("status") or {})


PLURAL = TEMPLATE_PLURALS[MACHINE_TEMPLATE]


def _world(answers: list[ImageFact], monkeypatch: pytest.MonkeyPatch) -> World:
    fake = FakeApi()
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": MACHINE_TEMPLATE,
        "metadata": {"name": "t1", "generation": 1},
        "spec": {"template": {"spec": {"source": {"image": IMAGE}}}},
    }
    fake.create(api.resource_path(Resource(GROUP, VERSION, PLURAL), NS), body)
    clock = SteppedClock(NOW)
    caches = Caches(fake, clock=clock, namespace=NS)
    registry = TableRegistry(clock, answers=answers, reference=IMAGE)
    world = World(fake, clock, caches, registry, TemplateKeeper(fake, caches, clock, registry))
    real = template_pass

    def counted(*args: Any, **kwargs: Any) -> Any:
        world.passes += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(templates, "template_pass", counted)
    return world


def _reason(status: Json) -> str:
    [cond] = [c for c in status["conditions"] if c["type"] == "CapacityResolved"]
    return str(cond["reason"])


async def test_a_new_template_looks_up_first_and_enters_the_core_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _world([FOUND], monkeypatch)
    assert (await world.reconcile()).requeue_after is None
    assert (world.passes, world.registry.asked) == (1, 1)
    assert world.status()["capacity"] == {"cpu": "4", "memory": "16Gi"}
    assert _reason(world.status()) == "CapacityResolved"

    # Shown: the next reconcile asks nothing and writes nothing.
    writes = len(world.fake.writes)
    await world.clock.advance(120.0)  # past the registry's cache: a lookup would ask
    await world.reconcile()
    assert (world.passes, world.registry.asked) == (2, 1)
    assert len(world.fake.writes) == writes


async def test_a_failed_lookup_is_retried_one_lookup_and_one_pass_a_reconcile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _world([MISSING, FOUND], monkeypatch)
    waited = await world.reconcile()
    assert (world.passes, world.registry.asked) == (1, 1)
    assert _reason(world.status()) == "ImageInspectFailed"
    assert waited.requeue_after == 30.0

    await world.clock.advance(30.0)  # past the failure's cache (15 s)
    assert (await world.reconcile()).requeue_after is None
    assert (world.passes, world.registry.asked) == (2, 2)
    assert _reason(world.status()) == "CapacityResolved"


async def test_a_pass_from_a_stale_read_conflicts_rather_than_leaving_keys_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cache shows the new spec (cpu only) but not yet the status the last pass wrote
    (the image's cpu and memory): a patch from that read would set cpu and leave memory
    in place. The status patch carries the version read, so it conflicts and the key is
    retried; the next read patches memory away."""
    world = _world([FOUND], monkeypatch)
    await world.reconcile()
    [before] = world.fake.of(PLURAL)
    stale = copy.deepcopy(before) | {"status": {}}
    stale["metadata"]["resourceVersion"] = "1"
    path = api.resource_path(Resource(GROUP, VERSION, PLURAL), NS, "t1")
    patch = {"metadata": {"generation": 2}, "spec": {"capacity": {"cpu": "2"}}}
    await world.fake.request("PATCH", path, body=patch, content_type=api.MERGE)
    stale["metadata"]["generation"] = 2
    stale["spec"]["capacity"] = {"cpu": "2"}
    world.caches.templates[MACHINE_TEMPLATE].store.replace([stale], "1")
    result = await world.keeper.reconcile(MACHINE_TEMPLATE, NS, "t1")
    assert result.requeue
    assert world.status()["capacity"] == {"cpu": "4", "memory": "16Gi"}  # untouched

    await world.reconcile()  # a fresh read
    assert world.status()["capacity"] == {"cpu": "2"}
