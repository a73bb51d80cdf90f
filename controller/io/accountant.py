"""Carrying out the accounting of a finished Job, exactly once.

A finished Job is accounted by: its Event (named after the Job and its uid, so a
replay after a crash is refused), the attempts histogram, releasing the Leases it
held, clearing the interrupted-apply records its success ends, marking its inputs
Secret `captf.io/applied` when it left a state, and last the
`captf.io/accounted` annotation, the one durable record. A crash anywhere before
the annotation replays the steps, and each step is idempotent. Every step is keyed
to the Job's uid: a Job deleted and created again under the same name is another
Job, accounted on its own. What to account, and how, is the plan's
(controller/core/plan/planner.py)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram

from controller.core import Accounting, Event, Sample
from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_APPLIED,
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
)
from controller.io import api, leases
from controller.io.api import Api
from runtime.errors import ApiError
from runtime.jsonobj import Json

log = logging.getLogger(__name__)


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
            "(JobFailed, JobDeadlineExceeded) and the error kind status.lastRun shows "
            "(cloud-throttled, apply, timeout, ...; empty when none)",
            ["kind", "op", "reason", "error_kind"],
            registry=registry,
        )
        self.steps = Histogram(
            "captf_runner_step_seconds",
            "Seconds each step (tofu command) of a finished Job's run took, as its runner "
            "reported them; result is ok or error by the step's exit code",
            ["kind", "op", "step", "result"],
            buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600),
            registry=registry,
        )
        self._observed: OrderedDict[str, None] = OrderedDict()

    def observe(self, sample: Sample) -> bool:
        """One sample per Job incarnation (by uid); False when this one was observed already."""
        if sample.uid and sample.uid in self._observed:
            return False
        self.attempts.labels(sample.kind, sample.op, sample.outcome).observe(sample.attempt)
        if sample.failure is not None:
            self.failures.labels(sample.kind, sample.op, sample.failure, sample.error_kind).inc()
        for step in sample.steps:
            self.steps.labels(sample.kind, sample.op, step.name, step.result).observe(step.seconds)
        if sample.uid:
            self._observed[sample.uid] = None
            while len(self._observed) > self.REMEMBERED:
                self._observed.popitem(last=False)
        return True


async def account(
    client: Api,
    obj: Json,
    accounting: Accounting,
    metrics: JobMetrics,
    now: datetime,
    known: leases.Known | None = None,
) -> None:
    """Accounts one finished Job of `obj`, the steps in the order above (`known`: the
    versions of the Leases it releases tried first)."""
    if accounting.event is not None:
        await emit(client, obj, accounting.event, now)
    if accounting.warning is not None:
        await emit(client, obj, accounting.warning, now)
    metrics.observe(accounting.sample)
    for write in accounting.releases:
        await leases.carry_out(client, write, now, known)
    namespace = obj["metadata"]["namespace"]
    for secret in accounting.clear_records:
        await clear_record(client, namespace, secret)
    for secret in accounting.mark_applied:
        await mark_applied(client, namespace, secret)
    await mark_accounted(client, namespace, accounting.job, accounting.uid)
    log.info(
        "%s/%s: Job %s %s (attempt %d)",
        obj["kind"],
        obj["metadata"]["name"],
        accounting.job,
        accounting.sample.outcome,
        accounting.sample.attempt,
        extra={"fields": {"job": accounting.job}},
    )


async def emit(client: Api, obj: Json, event: Event, now: datetime) -> bool:
    """Creates the Event once; False when it already existed."""
    body = api.event_body(obj, event, now)
    return await api.record_event(client, body)


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


async def clear_record(client: Api, namespace: str, secret: str) -> None:
    """Removes an interrupted-apply record: a merge patch of only these annotations, no
    precondition (removing them twice is removing them once)."""
    cleared = (ANN_INTERRUPTED_APPLY, ANN_INTERRUPTED_APPLY_AT, ANN_INTERRUPTED_APPLY_SEQ)
    patch = {"metadata": {"annotations": dict.fromkeys(cleared)}}
    await api.merge_patch(client, api.secret_path(namespace, secret), patch)


async def mark_applied(client: Api, namespace: str, secret: str) -> None:
    """Marks an inputs Secret as used by a Job that left a state: one annotation, no
    precondition (marking twice is marking once); an inputs Secret already gone has
    nothing to mark."""
    patch = {"metadata": {"annotations": {ANN_APPLIED: "true"}}}
    await api.patch_secret(client, namespace, secret, patch)
