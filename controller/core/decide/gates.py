"""What stands between a due op and its Job: its backoff, a change window, the leases.

Checked in that order; each returns a Requeue when it holds the op back."""

from __future__ import annotations

from datetime import datetime

from controller.core.basics.names import (
    CLUSTER,
    GATED_OPS,
    IDENTITY,
    LABEL_CLUSTER,
    LABEL_SCOPE,
    SCOPE_CLUSTER,
    SCOPE_MEMBER,
    Op,
    Reason,
    backoff_reason,
    op_lease_name,
)
from controller.core.basics.timefmt import format_time
from controller.core.decide import owners
from controller.core.decide.context import Context
from controller.core.decide.decision import Requeue
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs import backoff
from controller.core.jobs.job import labels_of, name_of
from controller.core.leases import family
from controller.core.leases.family import holder_of as _holder
from controller.core.leases.slots import cluster_full, is_run_slot
from controller.core.spec.identity import credentials_secret, verdict_of
from controller.core.spec.refs import cluster_of
from controller.core.spec.windows import next_opening, open_window
from runtime.jsonobj import Json

LEASE_WAIT = 30.0


# A wait on what is not ready yet (credentials, dependencies, the owner); a watch of it
# wakes the object sooner.
NOT_READY_WAIT = 30.0
# An identity that does not let the object run: the watches of identities, Namespaces
# and Secrets wake the object when that changes; the requeue is only the fallback.
IDENTITY_WAIT = 300.0


def _seconds(until: datetime, now: datetime) -> float:
    return max((until - now).total_seconds(), 0.0)


def check_backoff(ctx: Context, op: str, trigger: str) -> Requeue | None:
    """Requeue `<Trigger>Backoff` until the op's delay after its failures has passed."""
    until = backoff.retry_at(ctx.history, op, ctx.policy.failed_limit)
    if until is None or until <= ctx.now:
        return None
    failures = len(ctx.history.failures(op))
    # No "in N seconds" here: the message goes into status conditions, and a text that
    # changed with every pass would rewrite the status, and wake the watch, every pass.
    message = f"{op} failed {failures} time(s) in a row; next attempt at {format_time(until)}"
    return Requeue(
        reason=backoff_reason(trigger),
        after=_seconds(until, ctx.now),
        op=op,
        message=message,
        missed_window=_missed_window(ctx, op, until),
    )


def _missed_window(ctx: Context, op: str, retry_at: datetime) -> tuple[datetime, datetime] | None:
    """The window open now that closes before the retry may start: that window is missed."""
    if op not in GATED_OPS or not ctx.policy.windows:
        return None
    window = open_window(ctx.policy.windows, ctx.now)
    return window if window is not None and window[1] <= retry_at else None


def check_window(ctx: Context, op: str) -> Requeue | None:
    """Ops that change infrastructure start only inside a change window."""
    if op not in GATED_OPS or not ctx.policy.windows:
        return None
    opens = next_opening(ctx.policy.windows, ctx.now)
    if opens == ctx.now:
        return None
    if opens is None:  # unreachable with valid windows; wait a day and look again
        return Requeue(Reason.OUTSIDE_CHANGE_WINDOW, 86400.0, op, "no change window opens soon")
    message = f"{op} waits for the change window opening at {format_time(opens)}"
    return Requeue(Reason.OUTSIDE_CHANGE_WINDOW, _seconds(opens, ctx.now), op, message)


def _held_by_other(lease: Json, own_jobs: set[str]) -> bool:
    """A Lease is held while holderIdentity is set; our own finished Jobs' holds do not block us."""
    holder = _holder(lease)
    return bool(holder) and holder not in own_jobs


def slots_held(count: int) -> Requeue:
    """The wait for a run slot: the cache shows all `count` held (check_leases), or none is
    free to claim (holds.leases_held)."""
    return Requeue(
        Reason.WAITING_FOR_RUN_LEASE, LEASE_WAIT, message=f"all {count} run slots are held"
    )


def check_leases(ctx: Context, op: str) -> Requeue | None:
    """A free run slot within the cluster's cap, and no operation of the cluster (for its
    pools and machines) or of its members (for a cluster). An operation shows as its held
    operation Lease, as a member's entry on the cluster's operation Lease, or as the other
    object's status.activeJob, whichever the snapshot has. This reads a snapshot, which
    may lag; the launcher's compare-and-swap on the cluster's Lease is what excludes for
    certain."""
    snap, own = ctx.snap, _own_job_names(ctx.snap)
    held = [lease for lease in snap.leases if _held_by_other(lease, own)]
    slots = [lease for lease in held if is_run_slot(lease)]
    if len(slots) >= ctx.settings.max_concurrent_runs:
        return slots_held(ctx.settings.max_concurrent_runs)
    capped = cluster_capped(ctx, snap.next_job(op)[0])
    if capped is not None:
        return capped
    # Operation Leases live in the object's namespace; a same-named one elsewhere is another's.
    held = [lease for lease in held if _namespace_of(lease, snap.namespace) == snap.namespace]
    if snap.kind != CLUSTER:
        cluster = cluster_of(snap.obj, snap.related)
        leased = any(_is_cluster_lease(lease, cluster) for lease in held)
        if leased or _runs_a_job(snap.related.get((CLUSTER, cluster))):
            message = f"cluster {cluster} is running an operation"
            return Requeue(Reason.WAITING_FOR_CLUSTER_OPERATION, LEASE_WAIT, message=message)
        return None
    mine = owners.members(snap)
    members = {op_lease_name(kind, name): f"{kind}/{name}" for kind, name in mine}
    busy = {
        members.get(name_of(lease), name_of(lease))
        for lease in held
        if _is_member_lease(lease, snap.name, members)
    }
    busy |= {f"{ref.kind}/{ref.name}" for ref in mine if _runs_a_job(snap.related.get(ref))}
    # The members' Jobs recorded on the cluster's own operation Lease (the exclusion the
    # launcher writes), named by Job where no member Lease above names it already.
    shown = {_holder(lease) for lease in held if _is_member_lease(lease, snap.name, members)}
    busy |= set(_family_jobs(snap)) - shown
    if busy:
        message = f"members of this cluster are running operations ({', '.join(sorted(busy))})"
        return Requeue(Reason.WAITING_FOR_MACHINE_OPERATIONS, LEASE_WAIT, message=message)
    return None


def _family_jobs(snap: Snapshot) -> list[str]:
    name = family.lease_name(snap.name)
    return [
        job
        for lease in snap.leases
        if name_of(lease) == name and _namespace_of(lease, snap.namespace) == snap.namespace
        for job in family.member_jobs(lease)
    ]


def cluster_capped(ctx: Context, job: str) -> Requeue | None:
    """The per-cluster cap's wait for the launch of `job` (controller/core/leases/slots.py),
    the one reading of it: the gate above and the hold on the cached Leases
    (holds.claims_of) ask it of the same Job, so they cannot disagree."""
    snap, settings = ctx.snap, ctx.settings
    full = cluster_full(
        snap.leases,
        job=job,
        own_jobs=snap.job_names(),
        namespace=settings.slot_namespace,
        cluster=(snap.namespace, cluster_of(snap.obj, snap.related)),
        cap=settings.max_runs_per_cluster,
    )
    return None if full is None else Requeue(Reason.WAITING_FOR_RUN_LEASE, LEASE_WAIT, message=full)


def _own_job_names(snap: Snapshot) -> set[str]:
    """The object's Jobs, and the Jobs it would create next. Leases are taken before the
    Job is created, so after a crash in between, a Lease held in the name of the Job the
    same decision will create again is this object's own, not another's."""
    planned = {snap.next_job(op)[0] for op in Op}
    return snap.job_names() | planned


def _namespace_of(obj: Json, default: str) -> str:
    return str(obj.get("metadata", {}).get("namespace") or default)


def _runs_a_job(obj: Json | None) -> bool:
    return obj is not None and bool((obj.get("status") or {}).get("activeJob"))


def _is_cluster_lease(lease: Json, cluster: str) -> bool:
    if name_of(lease) == op_lease_name(CLUSTER, cluster):
        return True
    lease_labels = labels_of(lease)
    return lease_labels.get(LABEL_CLUSTER) == cluster and lease_labels.get(LABEL_SCOPE) == (
        SCOPE_CLUSTER
    )


def _is_member_lease(lease: Json, cluster: str, members: dict[str, str]) -> bool:
    """Labelled as a member's operation Lease of this cluster, or named after a member."""
    if name_of(lease) in members:
        return True
    lease_labels = labels_of(lease)
    return lease_labels.get(LABEL_CLUSTER) == cluster and lease_labels.get(LABEL_SCOPE) == (
        SCOPE_MEMBER
    )


def identity_held(ctx: Context, op: str) -> Requeue | None:
    """No Job of any op, a destroy included, runs with a TerraformClusterIdentity that
    does not allow the object's namespace, lacks its Secret or its required keys, or
    whose mirror Secret is not in the namespace yet: its credentials would not be there
    (or should not be). A Job already running is not stopped. A kind Secret reference
    keeps the older rule (`not_ready`: a destroy runs, and fails without it)."""
    ref = ctx.snap.identity_ref
    if ref is None or ref.kind != IDENTITY:
        return None
    verdict = verdict_of(ref, ctx.snap.identity, ctx.snap.namespace, ctx.snap.secrets)
    if not verdict.allowed:
        message = f"{op} waits: {verdict.message} ({verdict.reason})"
        return Requeue(Reason.CREDENTIALS_NOT_READY, IDENTITY_WAIT, op=op, message=message)
    mirror = credentials_secret(ref)
    if mirror not in ctx.snap.secrets:
        message = f"{op} waits for Secret {mirror}, the copy of {IDENTITY} {ref.name}'s Secret"
        return Requeue(Reason.CREDENTIALS_NOT_READY, NOT_READY_WAIT, op=op, message=message)
    return None
