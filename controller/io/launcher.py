"""Starting one op: the durable inputs Secret, the Leases, then the Job.

Leases come before the Job, so no Job ever runs without them; the Job's name
is deterministic, so a create replayed after a crash finds the Job there
(AlreadyExists) and adopts it instead of creating a second. The cluster/member
exclusion is a compare-and-swap on the cluster's operation Lease
(controller/core/family.py), so it holds whatever the cache showed the decision."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.core import family
from controller.core.decision import Requeue, Run
from controller.core.gates import LEASE_WAIT
from controller.core.inputs import Inputs
from controller.core.jobs import annotations_of
from controller.core.jobspec import (
    build_job,
    fresh_seq,
    inputs_secret,
    inputs_secret_name,
    job_name,
)
from controller.core.names import (
    ANN_INTERRUPTED_APPLY,
    CLUSTER,
    LABEL_SCOPE,
    RUN_SLOT_PREFIX,
    SCOPE_MEMBER,
    SCOPE_RUN_SLOT,
    op_lease_name,
)
from controller.core.policy import Policy
from controller.core.snapshot import Snapshot
from controller.io import api
from controller.io.api import ANN_HOLDER_NAMESPACE, Api
from runtime.errors import ApiError

Json = dict[str, Any]


@dataclass(frozen=True)
class Slots:
    namespace: str  # where the run-slot Leases live: the controller's namespace
    count: int  # --max-concurrent-runs


def planned_job_name(snap: Snapshot, op: str) -> str:
    return job_name(snap.name, snap.obj["metadata"]["uid"], op, _seq(snap, op))


def _seq(snap: Snapshot, op: str) -> int:
    """The attempt sequence of the op's next Job: past every Job there is, and past an apply
    recorded as deleted while it ran (its name is not reused)."""
    gone = {annotations_of(s).get(ANN_INTERRUPTED_APPLY) or "" for s in snap.inputs_secrets()}
    return fresh_seq(snap.name, snap.obj["metadata"]["uid"], snap.jobs, op, gone - {""})


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
    client: Api,
    snap: Snapshot,
    run: Run,
    *,
    inputs: Inputs,
    policy: Policy,
    slots: Slots,
    now: datetime,
) -> str | Requeue:
    """Creates what the op needs and its Job; returns the Job's name, or the wait that the
    cluster's operation Lease imposes when its live version says more than the cache did.
    Raises Refused, with the Leases taken for the Job freed again, when the API server
    refuses any of it."""
    seq = _seq(snap, run.op)
    name = job_name(snap.name, snap.obj["metadata"]["uid"], run.op, seq)
    slot: list[Json] = []  # the run slot, once taken
    try:
        return await _launch(
            client,
            snap,
            run,
            inputs=inputs,
            policy=policy,
            slots=slots,
            now=now,
            seq=seq,
            name=name,
            slot=slot,
        )
    except ApiError as err:
        if err.status not in REFUSED_STATUSES:
            raise
        # Held by a Job that will not exist, a run slot would be lost to every object and
        # a family entry would stop the cluster's other objects.
        await _forget(client, snap, name, slot)
        raise Refused(name, err) from None


async def _launch(
    client: Api,
    snap: Snapshot,
    run: Run,
    *,
    inputs: Inputs,
    policy: Policy,
    slots: Slots,
    now: datetime,
    seq: int,
    name: str,
    slot: list[Json],
) -> str | Requeue:
    if inputs_secret_name(snap.name, inputs) not in snap.secrets:
        await api.create(client, api.secret_path(snap.namespace), inputs_secret(snap.obj, inputs))
    taken = await _take_run_slot(client, snap, name, slots, now)
    slot.append(taken)
    try:
        wait = await _claim_family(client, snap, name, now)
    except ApiError as err:
        if err.status == 409:
            await _give_back(client, taken)
        raise
    if wait is not None:
        await _give_back(client, taken)
        return wait
    if snap.kind != CLUSTER:
        await _take_op_lease(client, snap, name, now)
    job = build_job(snap.obj, run, inputs=inputs, policy=policy, seq=seq, name=name)
    await api.create(client, api.job_path(snap.namespace), job)
    return name


async def _claim_family(client: Api, snap: Snapshot, job: str, now: datetime) -> Requeue | None:
    """Records `job` on the cluster's operation Lease, or returns the wait. The first try
    writes over the cached version; a stale one only costs a 409, and every later try
    reads the live Lease first."""
    cluster = snap.name if snap.kind == CLUSTER else _cluster_of(snap)
    if not cluster:
        return None  # a member of no cluster has no family to wait for
    name = family.lease_name(cluster)
    current = _cached_lease(snap, snap.namespace, name)
    for _ in range(family.CAS_ATTEMPTS):
        if snap.kind == CLUSTER:
            own = snap.job_names() | {job}
            change = family.claim_for_cluster(
                current, cluster=cluster, namespace=snap.namespace, job=job, own=own, now=now
            )
        else:
            change = family.claim_for_member(
                current, cluster=cluster, namespace=snap.namespace, job=job, now=now
            )
        if change is None:
            return None
        if isinstance(change, family.Busy):
            return Requeue(change.reason, LEASE_WAIT, message=change.message)
        try:
            await api.write_lease(client, current, change)
            return None
        except ApiError as err:
            if err.status != 409:
                raise
        current = await api.get_or_none(client, api.lease_path(snap.namespace, name))
    raise ApiError(409, "Conflict", f"Lease {name} changed {family.CAS_ATTEMPTS} times meanwhile")


async def _give_back(client: Api, slot: Json) -> None:
    """Frees the run slot taken for a Job that is not created after all. Best effort: a
    slot left held in the name of a Job that never came to be is the janitor's."""
    try:
        await api.release_lease(client, slot)
    except ApiError as err:
        if err.status != 409:
            raise


async def _forget(client: Api, snap: Snapshot, job: str, slot: list[Json]) -> None:
    """Removes `job` from every Lease launch may have written for it, each read live (the
    cache has not seen these writes). Best effort: a Lease changed meanwhile keeps the
    entry, and a Job that never came to be is the janitor's."""
    cluster = snap.name if snap.kind == CLUSTER else _cluster_of(snap)
    names = [(lease["metadata"]["namespace"], lease["metadata"]["name"]) for lease in slot]
    names.append((snap.namespace, family.lease_name(cluster)))
    if snap.kind != CLUSTER:
        names.append((snap.namespace, op_lease_name(snap.kind, snap.name)))
    for namespace, name in names:
        current = await api.get_or_none(client, api.lease_path(namespace, name))
        change = None if current is None else family.release(current, job)
        if current is None or change is None:
            continue
        try:
            await api.write_lease(client, current, change)
        except ApiError as err:
            if err.status != 409:
                raise


def _cached_lease(snap: Snapshot, namespace: str, name: str) -> Json | None:
    return next(
        (
            lease
            for lease in snap.leases
            if lease["metadata"]["name"] == name and lease["metadata"].get("namespace") == namespace
        ),
        None,
    )


def _cluster_of(snap: Snapshot) -> str:
    return str((snap.spec.get("clusterRef") or {}).get("name", ""))


def _holder(lease: Json) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _take_run_slot(
    client: Api, snap: Snapshot, job: str, slots: Slots, now: datetime
) -> Json:
    """Takes a free run slot (or finds the one already held for `job`); returns it."""
    by_name = {
        lease["metadata"]["name"]: lease
        for lease in snap.leases
        if lease["metadata"].get("namespace") == slots.namespace
        and lease["metadata"]["name"].startswith(RUN_SLOT_PREFIX)
    }
    for lease in by_name.values():
        if _holder(lease) == job:
            return lease
    own = snap.job_names()
    for i in range(slots.count):
        name = f"{RUN_SLOT_PREFIX}{i}"
        current = by_name.get(name)
        if current is not None and _holder(current) and _holder(current) not in own:
            continue
        body = api.lease_body(slots.namespace, name, job, now, {LABEL_SCOPE: SCOPE_RUN_SLOT})
        body["metadata"]["annotations"] = {ANN_HOLDER_NAMESPACE: snap.namespace}
        try:
            return await api.take_lease(client, current, body)
        except ApiError as err:
            if err.status != 409:
                raise
            # another worker took this slot meanwhile: try the next one
    raise ApiError(409, "Conflict", f"all {slots.count} run slots are held")


async def _take_op_lease(client: Api, snap: Snapshot, job: str, now: datetime) -> None:
    """A member's own operation Lease: what kubectl shows for it. The exclusion itself is
    the entry on its cluster's Lease, written before this."""
    name = op_lease_name(snap.kind, snap.name)
    current = _cached_lease(snap, snap.namespace, name)
    if current is not None and _holder(current) == job:
        return
    if current is not None and _holder(current) and _holder(current) not in snap.job_names():
        raise ApiError(409, "Conflict", f"Lease {name} is held by {_holder(current)}")
    labels = api.op_lease_labels(_cluster_of(snap), SCOPE_MEMBER)
    await api.take_lease(client, current, api.lease_body(snap.namespace, name, job, now, labels))
