"""Starting a Job, as data: its name, its inputs Secret and the Leases it takes first;
and the wait after the API server refused one. io carries it out
(controller/io/launcher.py). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from controller.core.basics.names import CLUSTER, RUN_SLOT_PREFIX, Reason, op_lease_name
from controller.core.decide.context import policy_and_inputs
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.gates import LEASE_WAIT
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs import backoff
from controller.core.jobs.job import name_of
from controller.core.leases import family
from controller.core.leases.family import Busy, holder_of
from controller.core.leases.writes import LeaseWrite, Role, change_of
from controller.core.plan.accounting import Event
from controller.core.plan.jobspec import build_job, inputs_secret, inputs_secret_name, next_job
from controller.core.spec.inputs import Inputs
from controller.core.spec.policy import Policy
from controller.core.spec.refs import cluster_of

Json = dict[str, Any]


@dataclass(frozen=True)
class Refusal:
    """The API server refused the object's Job `job` `count` times in a row: no new attempt
    before `until`. The streak is the Job's name: it stays the same until a Job of the
    object is created."""

    job: str
    count: int
    until: datetime
    message: str


def refusal_after(
    snap: Snapshot, last: Refusal | None, job: str, why: str, now: datetime
) -> Refusal:
    """The streak once the API server refused the object's `job` (`why`): backed off like
    a failed Job, under the object's failure limit."""
    count = last.count + 1 if last is not None and last.job == job else 1
    policy, _ = policy_and_inputs(snap)
    wait = backoff.delay(count, policy.failed_limit if policy is not None else 0)
    message = f"the API server refused Job {job}: {why}"
    return Refusal(job, count, now + timedelta(seconds=wait), message)


def refusal_event(refusal: Refusal) -> Event | None:
    """One Warning per streak, named after the refused Job: a restarted controller does
    not announce the same streak again."""
    if refusal.count != 1:
        return None
    return Event(f"{refusal.job}.jobrefused", "Warning", Reason.JOB_REFUSED, refusal.message)


@dataclass(frozen=True)
class Launch:
    job: Json
    inputs_secret: Json | None  # created first when the cache does not show it
    claims: tuple[LeaseWrite, ...]  # taken in this order, before the Job

    @property
    def name(self) -> str:
        return name_of(self.job)


@dataclass(frozen=True)
class Launching:
    policy: Policy
    inputs: Inputs
    slot_namespace: str
    now: datetime


def still_refused(
    snap: Snapshot, run: Run, refusal: Refusal | None, now: datetime
) -> Requeue | None:
    """The refusal wait, while it lasts and the same Job would be tried again: a pass woken
    by anything else (its own status write) must not ask again before then."""
    if refusal is None or now >= refusal.until or refusal.job != next_job(snap, run.op)[0]:
        return None
    wait = (refusal.until - now).total_seconds()
    return Requeue(Reason.JOB_REFUSED, wait, op=run.op, message=refusal.message)


def launch_of(snap: Snapshot, run: Run, how: Launching) -> Launch | Requeue:
    """The Job the decision runs, with its inputs Secret and its Leases; or the wait the
    cached Leases impose (the live ones are checked again when io takes them)."""
    name, seq = next_job(snap, run.op)
    claims = _claims(snap, name, how.slot_namespace)
    if not claims or claims[0].role != Role.RUN_SLOT:
        message = f"all {snap.max_concurrent_runs} run slots are held"
        return Requeue(Reason.WAITING_FOR_RUN_LEASE, LEASE_WAIT, message=message)
    for claim in claims:
        change = change_of(claim, _cached(snap, claim), how.now)
        if isinstance(change, Busy):
            return Requeue(change.reason, LEASE_WAIT, message=change.message)
    secret = None
    if inputs_secret_name(snap.name, how.inputs) not in snap.secrets:
        secret = inputs_secret(snap.obj, how.inputs)
    job = build_job(snap.obj, run, inputs=how.inputs, policy=how.policy, seq=seq, name=name)
    return Launch(job, secret, claims)


def _claims(snap: Snapshot, job: str, slot_namespace: str) -> tuple[LeaseWrite, ...]:
    """A run slot, the family's operation Lease, and a member's own operation Lease."""
    own = frozenset(snap.job_names())
    slot = _free_slot(snap, job, slot_namespace)
    if slot is None:
        return ()
    claims = [
        LeaseWrite(
            slot_namespace, slot, job, Role.RUN_SLOT, own=own, holder_namespace=snap.namespace
        )
    ]
    cluster = snap.name if snap.kind == CLUSTER else cluster_of(snap.obj)
    if snap.kind == CLUSTER:
        lease = family.lease_name(cluster)
        claims.append(LeaseWrite(snap.namespace, lease, job, Role.CLUSTER_FAMILY, cluster, own))
    elif cluster:  # a member of no cluster has no family to wait for
        lease = family.lease_name(cluster)
        claims.append(LeaseWrite(snap.namespace, lease, job, Role.MEMBER_FAMILY, cluster, own))
    if snap.kind != CLUSTER:
        lease = op_lease_name(snap.kind, snap.name)
        claims.append(LeaseWrite(snap.namespace, lease, job, Role.MEMBER_OWN, cluster, own))
    return tuple(claims)


def _free_slot(snap: Snapshot, job: str, namespace: str) -> str | None:
    """The run slot already held for `job`, else the first one free (or held by one of the
    object's own Jobs, finished and awaiting release); None when all are held."""
    slots = {
        name_of(lease): lease
        for lease in snap.leases
        if lease["metadata"].get("namespace") == namespace
        and name_of(lease).startswith(RUN_SLOT_PREFIX)
    }
    for name, lease in sorted(slots.items()):
        if holder_of(lease) == job:
            return name
    own = snap.job_names()
    for i in range(snap.max_concurrent_runs):
        name = f"{RUN_SLOT_PREFIX}{i}"
        holder = holder_of(slots.get(name))
        if not holder or holder in own:
            return name
    return None


def _cached(snap: Snapshot, write: LeaseWrite) -> Json | None:
    return next(
        (
            lease
            for lease in snap.leases
            if name_of(lease) == write.name
            and lease["metadata"].get("namespace") == write.namespace
        ),
        None,
    )
