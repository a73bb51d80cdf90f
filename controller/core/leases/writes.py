"""Lease writes as data: which Lease, for which Job, and what the write makes of it.

Every Lease write is a read-modify-write: io reads the Lease live, `change_of` (pure)
computes the new version from that one version, and io sends it with that version's
resourceVersion as precondition (a missing Lease is created, which fails if it
exists). A concurrent writer makes the write fail with 409, and the reconcile is
retried from a fresh read. The rules of the cluster's operation Lease are in
family.py; this module adds the run slots, a member's own operation Lease, and
releasing."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from controller.core.basics.names import (
    ANN_HOLDER_CLASS,
    ANN_HOLDER_CLUSTER,
    ANN_HOLDER_NAMESPACE,
    LABEL_CLUSTER,
    LABEL_SCOPE,
    SCOPE_MEMBER,
    SCOPE_RUN_SLOT,
    Reason,
)
from controller.core.basics.timefmt import format_micro
from controller.core.leases import budget_lease, family
from controller.core.leases.family import Busy, holder_of
from runtime.jsonobj import Json

LEASE_API: Json = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}


class Role(Enum):
    RELEASE = "release"  # the Job lets go: as holder or as member entry
    RUN_SLOT = "run-slot"  # one of --max-concurrent-runs
    CLUSTER_FAMILY = "cluster"  # a cluster's Job on its own operation Lease
    MEMBER_FAMILY = "member"  # a member's Job as an entry on its cluster's operation Lease
    MEMBER_OWN = "member-own"  # a member's own operation Lease (what kubectl shows)
    # A background Job's start on its credentials' budget Lease (budget_lease.py).
    BACKGROUND_BUDGET = "background-budget"


@dataclass(frozen=True)
class LeaseWrite:
    namespace: str
    name: str
    job: str
    role: Role
    cluster: str = ""  # the family: the cluster's name (a run slot's holder's)
    # Jobs whose hold does not block this one: the object's own (finished, awaiting release).
    own: frozenset[str] = field(default_factory=frozenset)
    holder_namespace: str = ""  # run slots: where the Job lives
    # Run slots: `background` or `change`, the class --background-run-share counts
    # (controller/core/leases/budget.py); "" is a change.
    holder_class: str = ""
    # The background budget: the credentials' key and their budget a minute.
    budget_key: str = ""
    per_minute: int = 0


def change_of(write: LeaseWrite, live: Json | None, now: datetime) -> Json | Busy | None:
    """The Lease to send; None when `live` already says what the write wants; Busy when
    someone else holds it."""
    match write.role:
        case Role.RELEASE:
            return None if live is None else family.release(live, write.job)
        case Role.CLUSTER_FAMILY:
            return family.claim_for_cluster(
                live,
                cluster=write.cluster,
                namespace=write.namespace,
                job=write.job,
                own=set(write.own),
                now=now,
            )
        case Role.MEMBER_FAMILY:
            return family.claim_for_member(
                live, cluster=write.cluster, namespace=write.namespace, job=write.job, now=now
            )
        case Role.RUN_SLOT | Role.MEMBER_OWN:
            return _take(write, live, now)
        case Role.BACKGROUND_BUDGET:
            return budget_lease.claim(
                live,
                namespace=write.namespace,
                key=write.budget_key,
                job=write.job,
                now=now,
                per_minute=write.per_minute,
            )


def _take(write: LeaseWrite, live: Json | None, now: datetime) -> Json | Busy | None:
    holder = holder_of(live)
    if holder == write.job:
        return None
    if holder and holder not in write.own:
        if write.role == Role.RUN_SLOT:
            return Busy(Reason.WAITING_FOR_RUN_LEASE, f"run slot {write.name} is held by {holder}")
        return Busy(Reason.WAITING_FOR_CLUSTER_OPERATION, f"Lease {write.name} is held by {holder}")
    body = lease_body(write, now)
    if live is None:
        return body
    meta = live["metadata"]
    labels = (meta.get("labels") or {}) | body["metadata"]["labels"]
    notes = (meta.get("annotations") or {}) | body["metadata"].get("annotations", {})
    spec = (live.get("spec") or {}) | body["spec"]
    return (
        LEASE_API
        | live
        | {"metadata": meta | {"labels": labels, "annotations": notes}, "spec": spec}
    )


def lease_body(write: LeaseWrite, now: datetime) -> Json:
    """A new Lease held by the write's Job."""
    meta: Json = {"name": write.name, "namespace": write.namespace}
    if write.role == Role.RUN_SLOT:
        meta["labels"] = {LABEL_SCOPE: SCOPE_RUN_SLOT}
        meta["annotations"] = {
            ANN_HOLDER_NAMESPACE: write.holder_namespace,
            ANN_HOLDER_CLUSTER: write.cluster,  # what the per-cluster cap counts
            # Always written: a slot taken over keeps the annotations it had.
            ANN_HOLDER_CLASS: write.holder_class or "change",
        }
    else:
        meta["labels"] = {LABEL_CLUSTER: write.cluster, LABEL_SCOPE: SCOPE_MEMBER}
    at = format_micro(now)
    spec = {"holderIdentity": write.job, "acquireTime": at, "renewTime": at}
    return LEASE_API | {"metadata": meta, "spec": spec}
