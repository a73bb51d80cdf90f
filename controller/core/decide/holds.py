"""The holds: what stops a Run that DecideOp's steps let through, each a wait of its own.

A step decides that an op is due and its gates (identity, backoff, window, the
Leases the snapshot shows, spec.suspend) let it run; then, in this order:

1. `refused`: the API server refused this very Job lately (`Facts.refusal`); its
   backoff has not passed;
2. `runner_rbac_not_ready`: the account its pod would run as has not opted in
   (`Facts.runner`, the namespace's runner RBAC as the caches show it);
3. `leases_held`: a Lease the launch would take is held in the cache: no free run
   slot, or the cluster family's exclusion says another Job of the family runs;
4. `image_resolving`: its module image must be looked up first (`Facts.image` does
   not hold the answer the pass asked for, controller/core/decide/pinning.py).

The first that holds turns the Run into its wait. They are part of DecideOp
(`steps.decide_in`), so `captf decide` prints the wait the controller makes: a hold
reads only the context, its Facts among it. Without Facts (`captf decide -f`) the
first two never hold, since nothing was refused and no RBAC was read.

A new wait that stands between a due op and its Job goes here (or in gates.py when
it belongs to one op's schedule), with what it reads in the Snapshot or the Facts.

Pure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from controller.core.basics.names import CLUSTER, MUTABLE_KINDS, Op, Reason, op_lease_name
from controller.core.decide import pinning, runner_rbac
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Requeue, Run
from controller.core.decide.facts import Refusal
from controller.core.decide.gates import LEASE_WAIT, cluster_capped, slots_held
from controller.core.decide.runner_rbac import Verdict
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs import backoff
from controller.core.jobs.job import name_of
from controller.core.leases import family
from controller.core.leases.family import Busy
from controller.core.leases.slots import free_slots
from controller.core.leases.writes import LeaseWrite, Role, change_of
from controller.core.spec.image import reference_digest
from controller.core.spec.policy import Policy
from controller.core.spec.refs import cluster_of
from runtime.jsonobj import Json

Hold = Callable[[Context, Run], Requeue | None]

# The runner's account is not ready: a label change on the account wakes the object sooner.
RUNNER_RBAC_WAIT = 30.0


def refusal_wait(refusal: Refusal, policy: Policy, now: datetime) -> float:
    """Seconds left of the refusal's backoff: like a failed Job's, under the object's
    failure limit, from the last refusal."""
    until = refusal.at + timedelta(seconds=backoff.delay(refusal.count, policy.failed_limit))
    return (until - now).total_seconds()


def refused(ctx: Context, run: Run) -> Requeue | None:
    """The refusal wait, while it lasts and the same Job would be tried again: a pass woken
    by anything else (its own status write) must not ask again before then."""
    refusal = ctx.facts.refusal
    if refusal is None or refusal.job != ctx.snap.next_job(run.op)[0]:
        return None
    wait = refusal_wait(refusal, ctx.policy, ctx.now)
    if wait <= 0:
        return None
    return Requeue(Reason.JOB_REFUSED, wait, op=run.op, message=refusal.message)


def runner_verdict(ctx: Context) -> Verdict | None:
    """The runner RBAC of the object's account; None when nothing was read of the
    namespace's RBAC (`captf decide` from a file)."""
    if ctx.facts.runner is None:
        return None
    return runner_rbac.verdict(ctx.snap.namespace, ctx.policy.service_account, ctx.facts.runner)


def runner_rbac_not_ready(ctx: Context, run: Run) -> Requeue | None:
    """No Job: its pod could not be created, or would run as an account whose owner did
    not consent."""
    verdict = runner_verdict(ctx)
    if verdict is None or verdict.ready:
        return None
    return Requeue(Reason.RUNNER_RBAC_NOT_READY, RUNNER_RBAC_WAIT, message=verdict.message)


def claims_of(ctx: Context, job: str) -> tuple[LeaseWrite, ...] | Requeue:
    """The Leases the launch of `job` takes, in order (a run slot, the family's operation
    Lease, a member's own), or the wait the cached Leases impose (the live ones are read
    again when io takes them)."""
    snap, settings = ctx.snap, ctx.settings
    capped = cluster_capped(ctx, job)
    if capped is not None:
        return capped
    claims = _claims(snap, job, settings.slot_namespace, settings.max_concurrent_runs)
    if not claims or claims[0].role != Role.RUN_SLOT:
        return slots_held(settings.max_concurrent_runs)
    for claim in claims:
        change = change_of(claim, _cached(snap, claim), ctx.now)
        if isinstance(change, Busy):
            return Requeue(change.reason, LEASE_WAIT, message=change.message)
    return claims


def leases_held(ctx: Context, run: Run) -> Requeue | None:
    claims = claims_of(ctx, ctx.snap.next_job(run.op)[0])
    return claims if isinstance(claims, Requeue) else None


def image_resolving(ctx: Context, run: Run) -> Requeue | None:
    """The wait while the pass's registry lookup is outstanding: io makes it as a step of
    this pass's plan (Plan.image_lookup) and requeues at once."""
    reference = lookup_needed(ctx, run)
    return None if reference is None else pinning.resolving(run, reference)


def lookup_needed(ctx: Context, decision: Decision) -> str | None:
    """The reference io must look up before this pass's Run may start (pinning.py says when);
    None when the Run needs no lookup, or the lookup was made."""
    image = ctx.inputs.image
    if image is None or not isinstance(decision, Run):
        return None
    fact = ctx.facts.image
    if fact is not None and fact.asked and fact.reference == image.reference:
        return None
    if not image.digest:
        return image.reference
    if ctx.snap.kind not in MUTABLE_KINDS and ctx.has_applied():
        return None  # pinned: an immutable machine never resolves its tag again
    if decision.op == Op.DRIFT and reference_digest(image.reference):
        return None
    return image.reference if decision.op in pinning.LOOKUP_OPS else None


HOLDS: tuple[Hold, ...] = (refused, runner_rbac_not_ready, leases_held, image_resolving)


def held(ctx: Context, decision: Decision) -> Decision:
    """The decision once the holds have had their say: a Run, or the first hold's wait."""
    for hold in HOLDS:
        if not isinstance(decision, Run):
            break
        decision = hold(ctx, decision) or decision
    return decision


def _claims(snap: Snapshot, job: str, slot_namespace: str, slots: int) -> tuple[LeaseWrite, ...]:
    """A run slot, the family's operation Lease, and a member's own operation Lease."""
    own = frozenset(snap.job_names())
    found = free_slots_of(snap, job, slot_namespace, slots)
    if not found:
        return ()
    cluster = cluster_of(snap.obj, snap.related)
    claims = [
        LeaseWrite(
            slot_namespace,
            found[0],
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


def free_slots_of(snap: Snapshot, job: str, slot_namespace: str, count: int) -> list[str]:
    """The run slots `job` may take, in the order to try them."""
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
