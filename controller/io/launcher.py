"""Carrying out a plan's Launch: the durable inputs Secret, the Leases, then the Job.

Leases come before the Job, so no Job ever runs without them; the Job's name is
deterministic, so a create replayed after a crash finds the Job there
(AlreadyExists) and adopts it instead of creating a second. Each Lease is a
read-modify-write with a precondition (controller/io/leases.py), so the
cluster/member exclusion holds whatever the cache showed the plan. When a Lease
turns out held after all, or the API server refuses the Job, the Leases this
launch took are given back: held by a Job that will not exist, a run slot would
be lost to every object and a family entry would stop the cluster's others."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from controller.core import Launch, LeaseWrite, Role
from controller.io import api, leases
from controller.io.api import Api
from runtime.errors import ApiError

# Answers that say the request itself is wrong or not allowed (invalid, forbidden by RBAC,
# an admission webhook or a quota): the same request fails the same way until something
# changes, so it is backed off, not retried at the rate limiter's pace.
REFUSED_STATUSES = frozenset({400, 403, 422})


class Refused(Exception):
    """The API server refused something the op's Job needs, or the Job itself."""

    def __init__(self, job: str, error: ApiError) -> None:
        super().__init__(f"Job {job}: {error}")
        self.job = job
        self.error = error


async def launch(
    client: Api, start: Launch, now: datetime, known: leases.Known | None = None
) -> None:
    """Creates what the Job needs, then the Job. Raises LeaseBusy when a Lease is held by
    another, ApiError(409) when one changed meanwhile, Refused when the API server refuses
    any of it; in each case after giving back the Leases it took. `known`: the Leases'
    versions tried first (controller/io/leases.py)."""
    taken: list[LeaseWrite] = []
    try:
        await _create(client, start, taken, now, known)
    except ApiError as err:
        await _give_back(client, taken, now)
        if err.status in REFUSED_STATUSES:
            raise Refused(start.name, err) from None
        raise
    except leases.LeaseBusy:
        await _give_back(client, taken, now)
        raise


async def _create(
    client: Api, start: Launch, taken: list[LeaseWrite], now: datetime, known: leases.Known | None
) -> None:
    namespace = start.job["metadata"]["namespace"]
    if start.inputs_secret is not None:
        await api.create(client, api.secret_path(namespace), start.inputs_secret)
    for claim in start.claims:
        if claim.role == Role.RUN_SLOT:
            await _take_slot(client, claim, start.other_slots, taken, now, known)
            continue
        taken.append(claim)  # before the write: its answer may be lost, not its effect
        await leases.carry_out(client, claim, now, known)
    await api.create(client, api.job_path(namespace), start.job)


async def _take_slot(
    client: Api,
    claim: LeaseWrite,
    others: tuple[str, ...],
    taken: list[LeaseWrite],
    now: datetime,
    known: leases.Known | None,
) -> None:
    """The run slot the plan chose, else the next it named: objects launching together
    all chose the same first free slot, and all but one find it taken (issue 31). The
    last refusal (LeaseBusy, or 409 when it changed meanwhile) is raised."""
    names = (claim.name, *others)
    for name in names:
        attempt = replace(claim, name=name)
        taken.append(attempt)  # before the write: its answer may be lost, not its effect
        try:
            await leases.carry_out(client, attempt, now, known)
            return
        except leases.LeaseBusy:
            if name == names[-1]:
                raise
        except ApiError as err:
            if err.status != 409 or name == names[-1]:
                raise
        taken.pop()  # refused: it took nothing


async def _give_back(client: Api, taken: list[LeaseWrite], now: datetime) -> None:
    for claim in reversed(taken):
        await leases.give_back(client, claim, now)
