"""A launch whose run slot another Job took meanwhile takes the next free slot the plan
named, in the same pass (controller/io/launcher.py): objects launching together all
see the same first free slot in their caches. When every slot named is taken, the
launch raises LeaseBusy and takes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.core import Launch, LeaseWrite, Role, change_of, holder_of
from controller.io import api
from controller.io.launcher import launch
from controller.io.leases import LeaseBusy
from tests.fakeapi import FakeApi

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
HOME, NS = "captf-system", "default"
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "m1-apply-1", "namespace": NS}}


async def hold(fake: FakeApi, slot: str, job: str) -> None:
    body = change_of(
        LeaseWrite(HOME, slot, job, Role.RUN_SLOT, "c1", holder_namespace=NS), None, NOW
    )
    assert isinstance(body, dict)
    await fake.request("POST", api.lease_path(HOME), body=body)


def start(*others: str) -> Launch:
    claim = LeaseWrite(
        HOME, "captf-run-slot-0", "m1-apply-1", Role.RUN_SLOT, "c1", holder_namespace=NS
    )
    return Launch(JOB, None, (claim,), other_slots=others)


async def holder(fake: FakeApi, slot: str) -> str | None:
    return holder_of(await fake.request("GET", api.lease_path(HOME, slot)))


async def test_a_slot_taken_meanwhile_passes_to_the_next_the_plan_named() -> None:
    fake = FakeApi()
    await hold(fake, "captf-run-slot-0", "m2-apply-1")
    await hold(fake, "captf-run-slot-1", "m3-apply-1")
    await launch(fake, start("captf-run-slot-1", "captf-run-slot-2"), NOW)
    assert await holder(fake, "captf-run-slot-0") == "m2-apply-1"
    assert await holder(fake, "captf-run-slot-1") == "m3-apply-1"
    assert await holder(fake, "captf-run-slot-2") == "m1-apply-1"
    assert ("POST", api.job_path(NS)) in fake.writes


async def test_every_slot_named_taken_is_lease_busy_and_no_job() -> None:
    fake = FakeApi()
    await hold(fake, "captf-run-slot-0", "m2-apply-1")
    await hold(fake, "captf-run-slot-1", "m3-apply-1")
    with pytest.raises(LeaseBusy):
        await launch(fake, start("captf-run-slot-1"), NOW)
    assert ("POST", api.job_path(NS)) not in fake.writes
    assert await holder(fake, "captf-run-slot-1") == "m3-apply-1"
