"""The Leases between a due op and its Job, read once per decision.

Two guards read them (guards.py): `leases`, what the snapshot shows of the run slots,
the cluster's cap and the family's operations, and `claims`, the Leases the launch
takes in order (a run slot, the family's operation Lease, a member's own) and whether
the cache shows one of them held. Both read one `LeaseReading`, made once for the
due op's Job: the per-cluster cap and the free slots are computed once, and the claims
ride on the Run (`Run.claims`, `Run.other_slots`) to the launch (plan/launching.py),
which never reads the Leases again. The snapshot may lag; the launcher's
compare-and-swap on each Lease is what excludes for certain. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from controller.core.basics.names import (
    CLUSTER,
    LABEL_CLUSTER,
    LABEL_SCOPE,
    SCOPE_CLUSTER,
    SCOPE_MEMBER,
    Op,
    Reason,
    op_lease_name,
)
from controller.core.decide import background, owners
from controller.core.decide.context import Context
from controller.core.decide.decision import Requeue
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import labels_of, name_of
from controller.core.leases import budget, family, slots
from controller.core.leases.family import Busy
from controller.core.leases.family import holder_of as _holder
from controller.core.leases.writes import LeaseWrite, Role, change_of
from controller.core.spec.refs import cluster_of
from runtime.jsonobj import Json

LEASE_WAIT = 30.0


@dataclass(frozen=True)
class LeaseReading:
    """What the Leases say of the launch of `job`, each part computed once, on first use."""

    ctx: Context
    job: str
    op: str = ""  # a background op takes only the slots of its share, and its budget

    @cached_property
    def capped(self) -> Requeue | None:
        """The per-cluster cap's wait (controller/core/leases/slots.py), the one reading of
        it: both guards ask it of the same Job, so they cannot disagree."""
        snap, settings = self.ctx.snap, self.ctx.settings
        full = slots.cluster_full(
            snap.leases,
            job=self.job,
            own_jobs=snap.job_names(),
            namespace=settings.slot_namespace,
            cluster=(snap.namespace, cluster_of(snap.obj, snap.related)),
            cap=settings.max_runs_per_cluster,
        )
        return (
            None
            if full is None
            else Requeue(Reason.WAITING_FOR_RUN_LEASE, LEASE_WAIT, message=full)
        )

    @cached_property
    def free_slots(self) -> tuple[str, ...]:
        """The run slots the Job may take, in the order to try them: a background Job only
        the last ones of its share (budget.background_slots), so the slot Leases hold the
        share whatever the caches show."""
        snap, settings = self.ctx.snap, self.ctx.settings
        found = slots.free_slots(
            snap.leases,
            job=self.job,
            own_jobs=snap.job_names(),
            namespace=settings.slot_namespace,
            count=settings.max_concurrent_runs,
        )
        share = background.share_of(self.ctx, self.op)
        if share is None or self._held_already(found):
            return tuple(found)
        count = settings.max_concurrent_runs
        return tuple(budget.background_slots(found, slots=count, share=share))

    def _held_already(self, found: list[str]) -> bool:
        """The slot the Job holds already (a replayed launch), which is its whatever the
        share."""
        return len(found) == 1 and any(
            name_of(lease) == found[0] and _holder(lease) == self.job
            for lease in self.ctx.snap.leases
        )

    @property
    def other_slots(self) -> tuple[str, ...]:
        """The slots to try, in order, when another Job took the first claim's meanwhile."""
        return self.free_slots[1:]

    @cached_property
    def claims(self) -> tuple[LeaseWrite, ...] | Requeue:
        """The Leases the launch takes, in order, or the wait the cached Leases impose (the
        live ones are read again when io takes them)."""
        if self.capped is not None:
            return self.capped
        claims = _claims(self.ctx.snap, self.job, self.ctx.settings.slot_namespace, self.free_slots)
        claims = background.with_claims(self.ctx, self.op, self.job, claims)
        if not claims or claims[0].role != Role.RUN_SLOT:
            if background.is_background(self.op):
                message = background.share_full(self.op)
                return Requeue(
                    Reason.WAITING_FOR_BACKGROUND_BUDGET, LEASE_WAIT, op=self.op, message=message
                )
            return slots_held(self.ctx.settings.max_concurrent_runs)
        for claim in claims:
            change = change_of(claim, _cached(self.ctx.snap, claim), self.ctx.now)
            if isinstance(change, Busy):
                return Requeue(change.reason, LEASE_WAIT, message=change.message)
        return claims


def slots_held(count: int) -> Requeue:
    """The wait for a run slot: the cache shows all `count` held (`busy`), or none is free
    to claim (`LeaseReading.claims`)."""
    return Requeue(
        Reason.WAITING_FOR_RUN_LEASE, LEASE_WAIT, message=f"all {count} run slots are held"
    )


def busy(reading: LeaseReading, op: str) -> Requeue | None:
    """A free run slot within the cluster's cap, and no operation of the cluster (for its
    pools and machines) or of its members (for a cluster). An operation shows as its held
    operation Lease, as a member's entry on the cluster's operation Lease, or as the other
    object's status.activeJob, whichever the snapshot has."""
    ctx = reading.ctx
    snap, own = ctx.snap, _own_job_names(ctx.snap)
    held = [lease for lease in snap.leases if _held_by_other(lease, own)]
    if (
        len([lease for lease in held if slots.is_run_slot(lease)])
        >= ctx.settings.max_concurrent_runs
    ):
        return slots_held(ctx.settings.max_concurrent_runs)
    if reading.capped is not None:
        return reading.capped
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
    running = {
        members.get(name_of(lease), name_of(lease))
        for lease in held
        if _is_member_lease(lease, snap.name, members)
    }
    running |= {f"{ref.kind}/{ref.name}" for ref in mine if _runs_a_job(snap.related.get(ref))}
    # The members' Jobs recorded on the cluster's own operation Lease (the exclusion the
    # launcher writes), named by Job where no member Lease above names it already.
    shown = {_holder(lease) for lease in held if _is_member_lease(lease, snap.name, members)}
    running |= set(_family_jobs(snap)) - shown
    if running:
        message = f"members of this cluster are running operations ({', '.join(sorted(running))})"
        return Requeue(Reason.WAITING_FOR_MACHINE_OPERATIONS, LEASE_WAIT, message=message)
    return None


def _claims(
    snap: Snapshot, job: str, slot_namespace: str, free: tuple[str, ...]
) -> tuple[LeaseWrite, ...]:
    """A run slot, the family's operation Lease, and a member's own operation Lease."""
    own = frozenset(snap.job_names())
    if not free:
        return ()
    cluster = cluster_of(snap.obj, snap.related)
    claims = [
        LeaseWrite(
            slot_namespace,
            free[0],
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


def _held_by_other(lease: Json, own_jobs: set[str]) -> bool:
    """A Lease is held while holderIdentity is set; our own finished Jobs' holds do not block us."""
    holder = _holder(lease)
    return bool(holder) and holder not in own_jobs


def _family_jobs(snap: Snapshot) -> list[str]:
    name = family.lease_name(snap.name)
    return [
        job
        for lease in snap.leases
        if name_of(lease) == name and _namespace_of(lease, snap.namespace) == snap.namespace
        for job in family.member_jobs(lease)
    ]


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
