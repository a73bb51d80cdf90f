"""Starting one op: the durable inputs Secret, the Leases, then the Job.

Leases come before the Job, so no Job ever runs without them; the Job's name
is deterministic, so a create replayed after a crash finds the Job there
(AlreadyExists) and adopts it instead of creating a second."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.core.decision import Run
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
    SCOPE_CLUSTER,
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


async def launch(
    client: Api,
    snap: Snapshot,
    run: Run,
    *,
    inputs: Inputs,
    policy: Policy,
    slots: Slots,
    now: datetime,
) -> str:
    """Creates what the op needs and its Job; returns the Job's name."""
    seq = _seq(snap, run.op)
    name = job_name(snap.name, snap.obj["metadata"]["uid"], run.op, seq)
    if inputs_secret_name(snap.name, inputs) not in snap.secrets:
        await api.create(client, api.secret_path(snap.namespace), inputs_secret(snap.obj, inputs))
    await _take_run_slot(client, snap, name, slots, now)
    await _take_op_lease(client, snap, name, now)
    job = build_job(snap.obj, run, inputs=inputs, policy=policy, seq=seq, name=name)
    await api.create(client, api.job_path(snap.namespace), job)
    return name


def _holder(lease: Json) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _take_run_slot(
    client: Api, snap: Snapshot, job: str, slots: Slots, now: datetime
) -> None:
    by_name = {
        lease["metadata"]["name"]: lease
        for lease in snap.leases
        if lease["metadata"].get("namespace") == slots.namespace
        and lease["metadata"]["name"].startswith(RUN_SLOT_PREFIX)
    }
    if any(_holder(lease) == job for lease in by_name.values()):
        return
    own = snap.job_names()
    for i in range(slots.count):
        name = f"{RUN_SLOT_PREFIX}{i}"
        current = by_name.get(name)
        if current is not None and _holder(current) and _holder(current) not in own:
            continue
        body = api.lease_body(slots.namespace, name, job, now, {LABEL_SCOPE: SCOPE_RUN_SLOT})
        body["metadata"]["annotations"] = {ANN_HOLDER_NAMESPACE: snap.namespace}
        try:
            await api.take_lease(client, current, body)
        except ApiError as err:
            if err.status != 409:
                raise
            continue  # another worker took this slot meanwhile: try the next one
        return
    raise ApiError(409, "Conflict", f"all {slots.count} run slots are held")


async def _take_op_lease(client: Api, snap: Snapshot, job: str, now: datetime) -> None:
    name = op_lease_name(snap.kind, snap.name)
    current = next(
        (
            lease
            for lease in snap.leases
            if lease["metadata"]["name"] == name
            and lease["metadata"].get("namespace") == snap.namespace
        ),
        None,
    )
    if current is not None and _holder(current) == job:
        return
    if current is not None and _holder(current) and _holder(current) not in snap.job_names():
        raise ApiError(409, "Conflict", f"Lease {name} is held by {_holder(current)}")
    if snap.kind == CLUSTER:
        labels = api.op_lease_labels(snap.name, SCOPE_CLUSTER)
    else:
        cluster = str((snap.spec.get("clusterRef") or {}).get("name", ""))
        labels = api.op_lease_labels(cluster, SCOPE_MEMBER)
    await api.take_lease(client, current, api.lease_body(snap.namespace, name, job, now, labels))
