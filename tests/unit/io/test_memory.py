"""The process memory: what it remembers of its own writes, and when it forgets."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.core import Resolved
from controller.core.basics.names import BACKOFF_CAP
from controller.io import memory
from controller.io.memory import BeingFreed, Memory
from runtime.clock import SteppedClock
from tests.builders import NOW


def test_the_ttls_keep_their_relations() -> None:
    assert memory.PENDING_TTL > memory.CACHE_LAG
    assert memory.DELETED_TTL > 2 * memory.CACHE_LAG
    assert memory.REFUSAL_TTL > BACKOFF_CAP


def test_an_object_waits_only_for_its_own_created_jobs() -> None:
    # Cluster "example" (uid c) and pool "example-workers" (uid p): the pool's Job name
    # starts with the cluster's name, but it is not the cluster's.
    mem = Memory(SteppedClock(NOW))
    mem.launched("c-key", "example-apply-1a2b3c4d", owner="c")
    mem.launched("p-key", "example-workers-drift-5e6f7a8b", owner="p")
    assert mem.pending_for("c", set()) == {"example-apply-1a2b3c4d"}
    assert mem.pending_for("p", set()) == {"example-workers-drift-5e6f7a8b"}


async def test_seen_and_expired_jobs_are_forgotten() -> None:
    clock = SteppedClock(NOW)
    mem = Memory(clock)
    mem.launched("a", "a-apply-1", owner="a")
    await clock.advance(100.0)
    mem.launched("a", "a-drift-2", owner="a")
    mem.launched("b", "b-apply-3", owner="b")
    # Another object's Job is not forgotten because of a name seen for this one.
    assert mem.pending_for("a", {"b-apply-3"}) == {"a-apply-1", "a-drift-2"}
    await clock.advance(memory.PENDING_TTL - 99.0)
    # The cache shows a-drift-2: no longer pending. a-apply-1 has outlived the TTL.
    assert mem.pending_for("a", {"a-drift-2"}) == frozenset()
    assert mem.creating() == {"b-apply-3"}
    assert mem.pending_for("b", set()) == {"b-apply-3"}


async def test_a_deleted_job_is_remembered_for_its_ttl_only() -> None:
    clock = SteppedClock(NOW)
    mem = Memory(clock)
    mem.deleting("c1-apply-1")
    deleted = mem.deleted  # a view: later passes read the same object, not a copy
    assert "c1-apply-1" in deleted
    assert "c1-apply-2" not in deleted
    await clock.advance(memory.DELETED_TTL + 1.0)
    assert "c1-apply-1" not in deleted
    assert len(deleted) == 0


async def test_a_refusal_streak_counts_until_a_job_is_created() -> None:
    clock = SteppedClock(NOW)
    mem = Memory(clock)
    first = mem.refused("k", "c1-apply-1", "quota", NOW)
    assert (first.count, first.announced) == (1, False)
    assert first.message == "the API server refused Job c1-apply-1: quota"
    mem.announced("k")
    later = NOW + timedelta(minutes=1)
    again = mem.refused("k", "c1-apply-1", "quota", later)
    assert (again.count, again.at, again.announced) == (2, later, True)
    # Another Job is another streak, to be announced again.
    other = mem.refused("k", "c1-apply-2", "quota", later)
    assert (other.count, other.announced) == (1, False)
    mem.launched("k", "c1-apply-2", owner="uid")
    assert mem.refusal("k") is None


async def test_a_refusal_streak_is_forgotten_with_its_object_or_after_its_ttl() -> None:
    clock = SteppedClock(NOW)
    mem = Memory(clock)
    mem.refused("k", "c1-apply-1", "quota", NOW)
    mem.forget("k")
    assert mem.refusal("k") is None
    mem.refused("k", "c1-apply-1", "quota", NOW)
    await clock.advance(memory.REFUSAL_TTL + 1.0)
    assert mem.refusal("k") is None


def test_a_launch_and_the_freeing_of_its_lease_exclude_each_other() -> None:
    mem = Memory(SteppedClock(NOW))
    with mem.launching("c1-apply-1"):
        assert mem.creating() == {"c1-apply-1"}
        assert not mem.begin_freeing("c1-apply-1")
    assert mem.creating() == set()
    assert mem.begin_freeing("c1-apply-1")
    with pytest.raises(BeingFreed), mem.launching("c1-apply-1"):
        pass
    mem.end_freeing("c1-apply-1")
    with mem.launching("c1-apply-1"):
        pass


REF = "reg.local/team/mod:1"
FOUND = Resolved(REF, "sha256:" + "1" * 64, size=1, role=None)


@pytest.mark.parametrize(
    ("reference", "deleting", "after", "handed"),
    [
        (REF, False, 0.0, True),  # the next pass of the object as it asked
        ("reg.local/team/mod:2", False, 0.0, False),  # the spec names another image now
        (REF, True, 0.0, False),  # its deletion began after the ask
        (REF, False, 61.0, False),  # the registry's cache has dropped it
    ],
)
async def test_an_image_answer_is_for_the_next_pass_of_the_object_that_asked(
    reference: str, deleting: bool, after: float, handed: bool
) -> None:
    clock = SteppedClock(NOW)
    mem = Memory(clock)
    mem.answered("a", FOUND, 60.0, deleting=False)
    await clock.advance(after)
    assert mem.answer("b", REF, deleting=False) is None  # another object's
    assert (mem.answer("a", reference, deleting=deleting) == FOUND) is handed
    assert mem.answer("a", REF, deleting=False) is None  # once read, forgotten
