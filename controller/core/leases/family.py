"""Cluster/member exclusion: one Lease per cluster that its whole family writes.

A cluster and its pools and machines never run Jobs at the same time. The one
object they all contend on is the cluster's operation Lease
`captf-op-terraformcluster-<cluster>`: its holderIdentity names the cluster's
running Job, and its annotation `captf.io/member-jobs` names the members' running
Jobs. Invariant: at every resourceVersion at most one of the two is non-empty.

Every write is computed here from one version of the Lease, keeps the
invariant, and is sent with that version's resourceVersion as precondition (a
missing Lease is created, which fails if it exists). Two writers that read the
same version cannot both succeed; the loser gets 409 and reads again. A Job is
created only after its entry was written, and the entry is removed only once
the Job is finished and accounted (or gone), so the entries of the current
version cover every unfinished Job of the family. Pure: io performs the writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import orjson

from controller.core.basics.names import (
    ANN_MEMBER_JOBS,
    CLUSTER,
    LABEL_CLUSTER,
    LABEL_SCOPE,
    SCOPE_CLUSTER,
    Reason,
    op_lease_name,
)
from controller.core.basics.timefmt import TimeFormatError, format_micro, parse_time
from controller.core.jobs.job import annotations_of
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Busy:
    """The other side of the family runs: the claimant waits."""

    reason: str
    message: str


def lease_name(cluster: str) -> str:
    return op_lease_name(CLUSTER, cluster)


def holder_of(lease: Json | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def member_jobs(lease: Json | None) -> dict[str, str]:
    """The members' running Jobs, name -> when the entry was written. A record an operator
    mangled reads as empty: the next member's write replaces it."""
    raw = annotations_of(lease or {}).get(ANN_MEMBER_JOBS)
    if not raw:
        return {}
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(job): str(at) for job, at in parsed.items()}


def claim_for_cluster(
    lease: Json | None, *, cluster: str, namespace: str, job: str, own: set[str], now: datetime
) -> Json | Busy | None:
    """The Lease that records the cluster's `job` as running; None when it already does.
    `own` are the cluster's Jobs: a hold of one of them (finished, awaiting release) does
    not block it."""
    if holder_of(lease) == job:
        return None
    members = member_jobs(lease)
    if members:
        running = ", ".join(sorted(members))
        return Busy(
            Reason.WAITING_FOR_MACHINE_OPERATIONS,
            f"members of this cluster are running operations ({running})",
        )
    holder = holder_of(lease)
    if holder and holder not in own:
        return Busy(
            Reason.WAITING_FOR_CLUSTER_OPERATION,
            f"the cluster's operation Lease is held by Job {holder}",
        )
    spec = {"holderIdentity": job, "acquireTime": format_micro(now), "renewTime": format_micro(now)}
    return _written(_or_new(lease, cluster, namespace), spec=spec, members={})


def claim_for_member(
    lease: Json | None, *, cluster: str, namespace: str, job: str, now: datetime
) -> Json | Busy | None:
    """The Lease that records a member's `job` as running; None when it already does."""
    members = member_jobs(lease)
    if job in members:
        return None
    holder = holder_of(lease)
    if holder:
        return Busy(
            Reason.WAITING_FOR_CLUSTER_OPERATION,
            f"cluster {cluster} is running an operation (Job {holder})",
        )
    spec = dict((lease or {}).get("spec") or {})
    new = members | {job: format_micro(now)}
    return _written(_or_new(lease, cluster, namespace), spec=spec, members=new)


def release(lease: Json, job: str) -> Json | None:
    """The Lease without `job`, as holder or as member; None when it records no such Job."""
    members = member_jobs(lease)
    spec = dict(lease.get("spec") or {})
    if holder_of(lease) != job and job not in members:
        return None
    if spec.get("holderIdentity") == job:
        spec.pop("holderIdentity")
    members.pop(job, None)
    return _written(lease, spec=spec, members=members)


def stale_members(
    lease: Json, *, live: Callable[[str], bool], now: datetime, after: float
) -> list[str]:
    """Member entries whose Job is not live (never created, gone, or already accounted)
    and that were written at least `after` seconds ago."""
    stale = []
    for job, at in member_jobs(lease).items():
        if live(job):
            continue
        try:
            age = (now - parse_time(at)).total_seconds()
        except TimeFormatError:
            age = after
        if age >= after:
            stale.append(job)
    return sorted(stale)


def without(lease: Json, jobs: list[str]) -> Json:
    members = {job: at for job, at in member_jobs(lease).items() if job not in jobs}
    return _written(lease, spec=dict(lease.get("spec") or {}), members=members)


def _or_new(lease: Json | None, cluster: str, namespace: str) -> Json:
    """The read version (labelled as the cluster's operation Lease), or a new Lease."""
    base: Json = lease or {"metadata": {"name": lease_name(cluster), "namespace": namespace}}
    labels = (base["metadata"].get("labels") or {}) | {
        LABEL_CLUSTER: cluster,
        LABEL_SCOPE: SCOPE_CLUSTER,
    }
    return base | {"metadata": base["metadata"] | {"labels": labels}}


def _written(base: Json, *, spec: Json, members: dict[str, str]) -> Json:
    """The Lease to send: `base` with its resourceVersion, if any, as the precondition."""
    meta = dict(base["metadata"])
    notes = dict(meta.get("annotations") or {})
    notes.pop(ANN_MEMBER_JOBS, None)
    if members:
        notes[ANN_MEMBER_JOBS] = orjson.dumps(members, option=orjson.OPT_SORT_KEYS).decode()
    meta["annotations"] = notes
    return base | {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": spec,
    }
