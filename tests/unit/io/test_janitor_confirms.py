"""The janitor frees a Lease only when the API server confirms its holder Job is not there.

The cache only nominates. Seen in a fault-injection run: a restarted controller's first
sweep listed a run slot held for a Job deleted minutes before; while the sweep freed
the Leases before it, the controller replayed that decision and created the Job under
the same (deterministic) name, and the slot was freed under the running Job."""

from __future__ import annotations

import copy
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from controller.core.basics.names import ANN_HOLDER_NAMESPACE
from controller.core.leases.stale import STALE_AFTER
from controller.core.plan.launching import Launch
from controller.io import api, janitor
from controller.io.memory import BeingFreed, Memory
from runtime.clock import SteppedClock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from tests.builders import NOW, lease

SLOT_NS, JOB_NS, JOB = "captf-system", "team-a", "c1-apply-00000000"


class LiveApi:
    """The API server's objects by path; GET answers 404 for what is not there."""

    def __init__(self, objects: dict[str, Json], on_get: Any = None) -> None:
        self.objects = objects
        self.writes: list[tuple[str, str]] = []
        self.on_get = on_get  # called with each path read, before the answer

    async def request(self, method: str, path: str, **kwargs: Any) -> Json:
        if method == "GET":
            if self.on_get is not None:
                await self.on_get(path)
            if path not in self.objects:
                raise ApiError(404, "NotFound", f"{path} not found")
            return copy.deepcopy(self.objects[path])
        self.writes.append((method, path))
        self.objects[path] = kwargs["body"]
        return copy.deepcopy(kwargs["body"])


def _slot() -> Json:
    held = lease("captf-run-slot-0", holder=JOB, labels={"captf.io/scope": "run-slot"})
    held["metadata"] |= {"namespace": SLOT_NS, "annotations": {ANN_HOLDER_NAMESPACE: JOB_NS}}
    taken = NOW - timedelta(seconds=STALE_AFTER * 2)
    held["spec"]["acquireTime"] = taken.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return held


# (case, the Job live in the API server, being created by this process, slot freed)
CASES = [
    ("the Job is not there", False, False, True),
    ("the Job exists, the cache is behind", True, False, False),
    ("the Job is being created here", False, True, False),
]


@pytest.mark.parametrize(
    ("job_live", "being_created", "freed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_a_slot_is_freed_only_when_its_job_is_confirmed_gone(
    job_live: bool, being_created: bool, freed: bool
) -> None:
    slot = _slot()
    objects = {api.lease_path(SLOT_NS, "captf-run-slot-0"): copy.deepcopy(slot)}
    if job_live:
        objects[api.job_path(JOB_NS, JOB)] = {"metadata": {"name": JOB, "namespace": JOB_NS}}
    client = LiveApi(objects)
    # The cache shows neither the Job nor anything but the slot: it nominates the slot.
    caches: Any = SimpleNamespace(all_leases=lambda: [slot], job=lambda *_: None)
    memory = Memory(SteppedClock(NOW))
    # The sweep's start sees no create; the create begins while it frees other Leases.
    started = [False]
    creating = memory.creating

    def creating_now() -> set[str]:
        if being_created and started[0]:
            memory._launching.add(JOB)
        started[0] = True
        return creating()

    memory.creating = creating_now  # type: ignore[method-assign]
    done = await janitor.sweep(client, caches, memory, SteppedClock(NOW), None)
    assert done == (["captf-run-slot-0"] if freed else [])
    assert bool(client.writes) == freed


async def test_no_launch_of_the_holder_starts_while_its_lease_is_being_freed() -> None:
    """The janitor's live read says 404; a replayed decision of that very Job must not
    create it before the release is written, or the slot is freed under it."""
    slot = _slot()
    refused: list[str] = []

    async def launch_meanwhile(path: str) -> None:
        if path == api.job_path(JOB_NS, JOB):
            start = Launch(
                job={"metadata": {"name": JOB, "namespace": JOB_NS}}, inputs_secret=None, claims=()
            )
            try:
                with memory.launching(start.name):
                    raise AssertionError("launched while its Lease was being freed")
            except BeingFreed as err:
                refused.append(str(err))

    client = LiveApi(
        {api.lease_path(SLOT_NS, "captf-run-slot-0"): copy.deepcopy(slot)}, launch_meanwhile
    )
    memory = Memory(SteppedClock(NOW))
    caches: Any = SimpleNamespace(all_leases=lambda: [slot], job=lambda *_: None)
    done = await janitor.sweep(client, caches, memory, SteppedClock(NOW), None)
    assert done == ["captf-run-slot-0"]
    assert refused == [JOB]  # refused; the reconcile is requeued as after a conflict
    assert (api.job_path(JOB_NS, JOB)) not in client.objects
