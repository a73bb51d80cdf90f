"""Starting a Job, as data: its name, its inputs Secret and the Leases it takes first,
labelled for the shard, and the wait should a Lease turn out held; and the wait and
the Warning after the API server refused one. io carries it out
(controller/io/launcher.py). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from controller.core.basics.names import CLUSTER, Reason, op_lease_name
from controller.core.basics.runner_vars import RunnerVar
from controller.core.decide.context import Context
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.facts import Refusal
from controller.core.decide.gates import LEASE_WAIT
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs import backoff
from controller.core.jobs.job import name_of
from controller.core.leases import family
from controller.core.leases.family import Busy
from controller.core.leases.slots import cluster_full, free_slots
from controller.core.leases.writes import LeaseWrite, Role, change_of
from controller.core.plan.accounting import Event
from controller.core.plan.jobspec import build_job, inputs_secret, inputs_secret_name
from controller.core.spec.identity import credentials_secret
from controller.core.spec.policy import Policy
from controller.core.spec.refs import cluster_of
from controller.core.spec.sharding import format_labels, shard_labels

Json = dict[str, Any]


@dataclass(frozen=True)
class Launch:
    job: Json
    inputs_secret: Json | None  # created first when the cache does not show it
    claims: tuple[LeaseWrite, ...]  # taken in this order, before the Job
    # Seconds to wait when a claim's live read finds the Lease held after all (the
    # cache showed it free): the same wait as when the cache shows it held.
    if_busy: float = LEASE_WAIT
    # The run slots to try, in order, when another Job took the first claim's meanwhile.
    other_slots: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return name_of(self.job)

    def wait_if_busy(self, reason: str) -> float | None:
        """Seconds to wait when a claim's live read finds a Lease held after all; None: try
        again at once, rate-limited, as after a conflict. A run slot taken meanwhile is
        the latter: objects launching together each pick the first slot their cache shows
        free, the same one, and all but one lose it; the next pass, on a fresher cache,
        picks another, or waits by the gate when none is left (issue 31: waiting
        LEASE_WAIT here made a MachineDeployment's Machines start one by one, seconds
        apart, with slots free)."""
        return None if reason == Reason.WAITING_FOR_RUN_LEASE else self.if_busy


def refusal_wait(refusal: Refusal, policy: Policy, now: datetime) -> float:
    """Seconds left of the refusal's backoff: like a failed Job's, under the object's
    failure limit, from the last refusal."""
    until = refusal.at + timedelta(seconds=backoff.delay(refusal.count, policy.failed_limit))
    return (until - now).total_seconds()


def still_refused(ctx: Context, run: Run) -> Requeue | None:
    """The refusal wait, while it lasts and the same Job would be tried again: a pass woken
    by anything else (its own status write) must not ask again before then."""
    refusal = ctx.facts.refusal
    if refusal is None or refusal.job != ctx.snap.next_job(run.op)[0]:
        return None
    wait = refusal_wait(refusal, ctx.policy, ctx.now)
    if wait <= 0:
        return None
    return Requeue(Reason.JOB_REFUSED, wait, op=run.op, message=refusal.message)


def refusal_event(refusal: Refusal | None) -> tuple[Event, ...]:
    """One Warning per streak, until recorded, named after the refused Job: a restarted
    controller does not announce the same streak again."""
    if refusal is None or refusal.announced:
        return ()
    name = f"{refusal.job}.jobrefused"
    return (Event(name, "Warning", Reason.JOB_REFUSED, refusal.message),)


def launch_of(ctx: Context, run: Run) -> Launch | Requeue:
    """The Job the decision runs, with its inputs Secret and its Leases, labelled for the
    shard; or the wait the cached Leases impose (the live ones are checked again when io
    takes them)."""
    snap, settings = ctx.snap, ctx.settings
    name, seq = snap.next_job(run.op)
    full = cluster_full(
        snap.leases,
        job=name,
        own_jobs=snap.job_names(),
        namespace=settings.slot_namespace,
        cluster=(snap.namespace, cluster_of(snap.obj, snap.related)),
        cap=settings.max_runs_per_cluster,
    )
    claims = (
        () if full else _claims(snap, name, settings.slot_namespace, settings.max_concurrent_runs)
    )
    if not claims or claims[0].role != Role.RUN_SLOT:
        message = full or f"all {settings.max_concurrent_runs} run slots are held"
        return Requeue(Reason.WAITING_FOR_RUN_LEASE, LEASE_WAIT, message=message)
    for claim in claims:
        change = change_of(claim, _cached(snap, claim), ctx.now)
        if isinstance(change, Busy):
            return Requeue(change.reason, LEASE_WAIT, message=change.message)
    secret = None
    if inputs_secret_name(snap.name, ctx.inputs) not in snap.secrets:
        secret = inputs_secret(snap.obj, ctx.inputs)
    credentials = credentials_secret(snap.identity_ref)
    job = build_job(
        snap.obj,
        run,
        inputs=ctx.inputs,
        policy=ctx.policy,
        seq=seq,
        name=name,
        credentials=credentials,
    )
    labels = shard_labels(snap.obj, settings.shard_keys)
    others = _slots(snap, name, settings.slot_namespace, settings.max_concurrent_runs)[1:]
    return labelled_launch(Launch(job, secret, claims, other_slots=tuple(others)), labels)


def _claims(snap: Snapshot, job: str, slot_namespace: str, slots: int) -> tuple[LeaseWrite, ...]:
    """A run slot, the family's operation Lease, and a member's own operation Lease."""
    own = frozenset(snap.job_names())
    found = _slots(snap, job, slot_namespace, slots)
    if not found:
        return ()
    slot = found[0]
    cluster = cluster_of(snap.obj, snap.related)
    claims = [
        LeaseWrite(
            slot_namespace,
            slot,
            job,
            Role.RUN_SLOT,
            cluster,
            own=own,
            holder_namespace=snap.namespace,
        )
    ]
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


def _slots(snap: Snapshot, job: str, slot_namespace: str, count: int) -> list[str]:
    own = snap.job_names()
    return free_slots(snap.leases, job=job, own_jobs=own, namespace=slot_namespace, count=count)


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


# A shard's labels go on what a launch writes: the Job, its pod, its inputs Secret, and the
# runner's environment (the runner labels its own Secrets with them).
def labelled_launch(start: Launch, labels: Mapping[str, str]) -> Launch:
    """The launch with `labels` on its Job (and pod), its inputs Secret, and in the
    runner's environment."""
    if not labels:
        return start
    job = _with_labels(start.job, labels)
    spec = job["spec"]
    template = spec["template"]
    pod = template["spec"]
    entry = {"name": RunnerVar.SHARD_LABELS.value, "value": format_labels(labels)}
    containers = [c | {"env": [*(c.get("env") or []), entry]} for c in pod["containers"]]
    template = _with_labels(template, labels) | {"spec": pod | {"containers": containers}}
    job = job | {"spec": spec | {"template": template}}
    secret = start.inputs_secret
    return replace(
        start, job=job, inputs_secret=None if secret is None else _with_labels(secret, labels)
    )


def labelled_secret(body: Json | None, labels: Mapping[str, str]) -> Json | None:
    return None if body is None or not labels else _with_labels(body, labels)


def _with_labels(body: Json, labels: Mapping[str, str]) -> Json:
    meta = body.get("metadata") or {}
    return body | {"metadata": meta | {"labels": {**labels, **(meta.get("labels") or {})}}}
