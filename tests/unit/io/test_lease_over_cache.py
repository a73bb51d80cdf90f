"""A Lease write tries the version the process knows first and reads live only when it
must (controller/io/leases.py): a current copy saves the read, and so does the version
the process wrote itself before the cache shows it; a version behind the live Lease
costs a 409 and the live read, and whatever the live Lease says then stands; an answer
of "nothing to do" or "held by another" is never taken from the cache."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.core import LeaseWrite, Role, change_of, holder_of
from controller.io import api
from controller.io.leases import Known, LeaseBusy, carry_out
from runtime.jsonobj import Json
from tests.fakeapi import FakeApi

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
HOME, NS, SLOT = "captf-system", "default", "captf-run-slot-0"
PATH = api.lease_path(HOME, SLOT)


@dataclass
class Counted(FakeApi):
    """The fake API server, counting every request it is asked, answered or not."""

    asked: list[tuple[str, str]] = field(default_factory=list)

    async def request(self, method: str, path: str, **kwargs: Any) -> Json:
        self.asked.append((method, path))
        return await super().request(method, path, **kwargs)


def claim(job: str) -> LeaseWrite:
    return LeaseWrite(HOME, SLOT, job, Role.RUN_SLOT, "c1", holder_namespace=NS)


def release(job: str) -> LeaseWrite:
    return LeaseWrite(HOME, SLOT, job, Role.RELEASE)


async def written(server: Counted, write: LeaseWrite) -> Json:
    """The Lease after `write` over the live version; its requests are not counted."""
    there = any(lease["metadata"]["name"] == SLOT for lease in server.of("leases"))
    live = await server.request("GET", PATH) if there else None
    body = change_of(write, live, NOW)
    assert isinstance(body, dict)
    method, path = ("PUT", PATH) if live else ("POST", api.lease_path(HOME))
    out = await server.request(method, path, body=body)
    server.asked.clear()
    return out


async def freed(server: Counted) -> Json:
    """The slot's version once another Job held it and let go: free."""
    await written(server, claim("m2-apply-1"))
    return await written(server, release("m2-apply-1"))


def cache_of(lease: Json | None) -> Known:
    """What the process knows when its cache holds `lease` (None: no copy)."""
    held = copy.deepcopy(lease)
    return Known(lambda namespace, name: held if (namespace, name) == (HOME, SLOT) else None)


async def live_holder(server: FakeApi) -> str:
    return holder_of(await server.request("GET", PATH))


async def test_a_current_copy_is_written_over_without_a_read() -> None:
    server = Counted()
    free = await freed(server)

    assert await carry_out(server, claim("m1-apply-1"), NOW, cache_of(free))

    assert server.asked[0] == ("PUT", PATH)
    assert await live_holder(server) == "m1-apply-1"


async def test_a_copy_behind_the_live_lease_costs_a_conflict_then_reads_live() -> None:
    server = Counted()
    old = await written(server, claim("m2-apply-1"))
    await written(server, release("m2-apply-1"))  # the cache has not seen the release

    assert await carry_out(server, release("m2-apply-1"), NOW, cache_of(old)) is False

    assert server.asked == [("PUT", PATH), ("GET", PATH)]  # 409, then nothing to do


async def test_a_holder_only_the_cache_shows_is_asked_of_the_live_lease() -> None:
    server = Counted()
    held = await written(server, claim("m2-apply-1"))
    await written(server, release("m2-apply-1"))  # let go; the cache lags

    assert await carry_out(server, claim("m1-apply-1"), NOW, cache_of(held))

    assert server.asked == [("GET", PATH), ("PUT", PATH)]
    assert await live_holder(server) == "m1-apply-1"


async def test_a_slot_free_in_the_cache_but_taken_live_is_busy() -> None:
    server = Counted()
    free = await freed(server)
    await written(server, claim("m3-apply-1"))  # taken since the cache's copy

    with pytest.raises(LeaseBusy):
        await carry_out(server, claim("m1-apply-1"), NOW, cache_of(free))

    assert server.asked == [("PUT", PATH), ("GET", PATH)]
    assert await live_holder(server) == "m3-apply-1"


async def test_without_a_copy_the_lease_is_read_live() -> None:
    server = Counted()
    await written(server, claim("m2-apply-1"))

    assert await carry_out(server, release("m2-apply-1"), NOW, cache_of(None))

    assert server.asked == [("GET", PATH), ("PUT", PATH)]
    assert not await live_holder(server)


async def test_its_own_write_is_known_before_the_cache_shows_it() -> None:
    server = Counted()
    known = cache_of(await freed(server))  # the cache stays at this version throughout

    assert await carry_out(server, claim("m1-apply-1"), NOW, known)
    assert await carry_out(server, release("m1-apply-1"), NOW, known)

    assert server.asked == [("PUT", PATH), ("PUT", PATH)]
    assert not await live_holder(server)


async def test_a_lease_deleted_since_is_read_live_and_created_again() -> None:
    server = Counted()
    gone = await freed(server)
    await server.request("DELETE", PATH, body={})
    server.asked.clear()

    assert await carry_out(server, claim("m1-apply-1"), NOW, cache_of(gone))

    assert server.asked == [("PUT", PATH), ("GET", PATH), ("POST", api.lease_path(HOME))]
    assert await live_holder(server) == "m1-apply-1"
