"""Accounting finished Jobs exactly once, pruning old ones, and the retry-capped tail.

A finished Job is accounted by: its Event (named after the Job and its uid, so
a replay after a crash is refused), the attempts histogram, releasing the Leases
it held, and last the `captf.io/accounted` annotation, the one durable record.
A crash anywhere before the annotation replays the steps, and each step is
idempotent. Every step is keyed to the Job's uid: a Job deleted and created
again under the same name is another Job, accounted on its own."""

from __future__ import annotations

import logging
from collections import OrderedDict
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from controller.core import bookkeeping, family, triggers
from controller.core.history import Finished, History
from controller.core.jobs import Outcome, annotations_of
from controller.core.names import (
    ANN_ACCOUNTED,
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
    CLUSTER,
    LABEL_RETRY_CAPPED,
    Op,
)
from controller.core.serials import requested_serial
from controller.core.snapshot import Snapshot
from controller.core.successes import success_event
from controller.io import api
from controller.io.api import Api
from runtime.errors import ApiError

log = logging.getLogger(__name__)
Json = dict[str, Any]


class JobMetrics:
    # uids remembered so a replay in this process does not observe a Job twice; a restarted
    # process starts a fresh registry, where observing again is right.
    REMEMBERED = 10_000

    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Histogram(
            "captf_job_attempts",
            "Retry number of each finished Job: 1 + earlier failed Jobs of its op since the "
            "last success (blocked and plan-changed not counted)",
            ["kind", "op", "outcome"],
            buckets=(1, 2, 3, 4, 5, 6, 8, 10, 15, 20),
            registry=registry,
        )
        self.failures = Counter(
            "captf_job_failures_total",
            "Finished Jobs counted as failures, by the reason of their Event "
            "(JobFailed, JobDeadlineExceeded)",
            ["kind", "op", "reason"],
            registry=registry,
        )
        self._observed: OrderedDict[str, None] = OrderedDict()

    def observe(
        self, uid: str, kind: str, op: str, outcome: str, attempt: int, failure: str | None = None
    ) -> bool:
        """One sample per Job incarnation (by uid); False when this one was observed already.
        `failure` is the Event reason of a counted failure."""
        if uid and uid in self._observed:
            return False
        self.attempts.labels(kind, op, outcome).observe(attempt)
        if failure is not None:
            self.failures.labels(kind, op, failure).inc()
        if uid:
            self._observed[uid] = None
            while len(self._observed) > self.REMEMBERED:
                self._observed.popitem(last=False)
        return True


def _event_type(outcome: Outcome) -> str:
    return "Normal" if outcome in (Outcome.SUCCESS, Outcome.INTERRUPTED) else "Warning"


async def account(
    client: Api, snap: Snapshot, history: History, metrics: JobMetrics, now: datetime
) -> list[Finished]:
    """Accounts every finished, unaccounted Job of the object, oldest first."""
    done = []
    for record in bookkeeping.unaccounted(history):
        await _account_one(client, snap, history, record, metrics, now)
        done.append(record)
    return done


async def _account_one(
    client: Api,
    snap: Snapshot,
    history: History,
    record: Finished,
    metrics: JobMetrics,
    now: datetime,
) -> None:
    verdict = record.verdict
    uid = str(record.job.get("metadata", {}).get("uid") or "")
    event = (verdict.event, verdict.message) if verdict.event else success_event(record)
    if event is not None:
        reason, message = event
        body = api.event_body(
            snap.obj,
            event_name(record.name, uid, reason),
            type_=_event_type(record.outcome),
            reason=reason,
            message=message,
            now=now,
        )
        await api.record_event(client, body)
    attempt = bookkeeping.attempt_number(history, record)
    failure = (verdict.event or "JobFailed") if record.outcome == Outcome.FAILURE else None
    metrics.observe(uid, snap.kind, record.op, record.outcome.value, attempt, failure)
    await release_leases(client, snap, record.name)
    if record.op == Op.APPLY and record.outcome == Outcome.SUCCESS:
        await _clear_interrupted(client, snap, record)
    await mark_accounted(client, snap.namespace, record.name, uid)
    record.job.setdefault("metadata", {}).setdefault("annotations", {})[ANN_ACCOUNTED] = "true"
    log.info(
        "%s/%s: Job %s %s (attempt %d)",
        snap.kind,
        snap.name,
        record.name,
        record.outcome.value,
        attempt,
        extra={"fields": {"job": record.name}},
    )


def event_name(job: str, uid: str, reason: str) -> str:
    """One Event per Job incarnation: a Job deleted and created again under the same name
    (an operator forgot a failure, so the attempt repeats) is a new object with a new uid,
    and gets its own Event."""
    return f"{job}.{uid}.{reason.lower()}" if uid else f"{job}.{reason.lower()}"


async def mark_accounted(client: Api, namespace: str, job: str, uid: str) -> None:
    """The durable record, on exactly the incarnation accounted: the uid in the patch must
    match, so a patch meant for a deleted Job never marks a successor of the same name."""
    meta: Json = {"annotations": {ANN_ACCOUNTED: "true"}}
    if uid:
        meta["uid"] = uid
    try:
        await api.merge_patch(client, api.job_path(namespace, job), {"metadata": meta})
    except ApiError as err:
        # Gone (404), or the name now belongs to a successor (422: uid is immutable): the
        # Job accounted is no more, and nothing will account it again.
        if err.status != 404 and not (err.status == 422 and "metadata.uid" in str(err)):
            raise


async def release_leases(client: Api, snap: Snapshot, job: str) -> None:
    """Frees every Lease the Job holds. A member's entry on its cluster's operation Lease
    goes first: freeing the member's own Lease wakes the waiting cluster, which should then
    find the entry gone. The snapshot's copies are replaced by the freed ones, so the rest
    of the reconcile sees them free and takes them with their current resourceVersion (a
    Job started in the same pass reuses the slot without a conflict)."""
    if snap.kind != CLUSTER:
        await _leave_family(client, snap, job)
    for i, lease in enumerate(snap.leases):
        if (lease.get("spec") or {}).get("holderIdentity") == job:
            freed = await api.release_lease(client, lease)
            if freed is not None:
                snap.leases[i] = freed | {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}


async def _leave_family(client: Api, snap: Snapshot, job: str) -> None:
    """Removes a member's Job from its cluster's operation Lease. Read live: the entry was
    written moments before the Job was created and the cache may not show it yet, and a
    stale entry would keep the cluster waiting. Also from any other cached Lease that
    names the Job (the member's clusterRef changed while it ran)."""
    cluster = str((snap.spec.get("clusterRef") or {}).get("name", ""))
    names = {family.lease_name(cluster)} if cluster else set()
    names |= {
        lease["metadata"]["name"]
        for lease in snap.leases
        if lease["metadata"].get("namespace") == snap.namespace and job in family.member_jobs(lease)
    }
    for name in sorted(names):
        await _drop_entry(client, snap.namespace, name, job)


async def _drop_entry(client: Api, namespace: str, name: str, job: str) -> None:
    path = api.lease_path(namespace, name)
    for _ in range(family.CAS_ATTEMPTS):
        current = await api.get_or_none(client, path)
        change = None if current is None else family.release(current, job)
        if current is None or change is None:
            return
        try:
            await api.write_lease(client, current, change)
            return
        except ApiError as err:
            if err.status != 409:
                raise
    raise ApiError(409, "Conflict", f"Lease {name} changed {family.CAS_ATTEMPTS} times meanwhile")


async def _clear_interrupted(client: Api, snap: Snapshot, applied: Finished) -> None:
    """An apply started after an interrupted apply was recorded succeeded: clear the record."""
    for secret in snap.inputs_secrets():
        notes = annotations_of(secret)
        if not notes.get(ANN_INTERRUPTED_APPLY):
            continue
        if triggers.started_after_record(applied.job, notes) is False:
            continue
        cleared = (ANN_INTERRUPTED_APPLY, ANN_INTERRUPTED_APPLY_AT, ANN_INTERRUPTED_APPLY_SEQ)
        patch = {"metadata": {"annotations": dict.fromkeys(cleared)}}
        await api.merge_patch(
            client, api.secret_path(snap.namespace, secret["metadata"]["name"]), patch
        )


def restored_serial(accounted: list[Finished]) -> int | None:
    """The serial of the newest restore Job just accounted: the restore was attempted."""
    restores = [r for r in accounted if r.op == Op.RESTORE]
    if not restores:
        return None
    return requested_serial(annotations_of(max(restores, key=lambda r: r.at).job))


async def prune(
    client: Api, snap: Snapshot, history: History, *, failed_limit: int, successful_limit: int
) -> list[str]:
    keep = frozenset(
        filter(None, [snap.status.get("activeJob"), snap.annotations.get("captf.io/approve")])
    )
    doomed = bookkeeping.prune(
        history, failed_limit=failed_limit, successful_limit=successful_limit, keep=keep
    )
    for name in doomed:
        await api.delete_job(client, snap.namespace, name)
    return doomed


async def mark_capped(
    client: Api, snap: Snapshot, history: History, failed_limit: int, now: datetime
) -> None:
    """The `captf.io/retry-capped=<op>` label while an op's failures are at the limit, and one
    RetryCapped Warning per streak (named after the Job that reached the cap)."""
    capped = bookkeeping.capped(history, failed_limit)
    current = (snap.obj["metadata"].get("labels") or {}).get(LABEL_RETRY_CAPPED)
    wanted = capped.op if capped else None
    if capped is not None and current != wanted:
        message = (
            f"{capped.op} failed {len(history.failures(capped.op))} times in a row; "
            f"retrying every 10m until it succeeds"
        )
        body = api.event_body(
            snap.obj,
            f"{capped.reached_by}.retrycapped",
            type_="Warning",
            reason="RetryCapped",
            message=message,
            now=now,
        )
        await api.record_event(client, body)
    if current != wanted:
        path = api.object_path(snap.kind, snap.namespace, snap.name)
        await api.merge_patch(client, path, {"metadata": {"labels": {LABEL_RETRY_CAPPED: wanted}}})
