"""The CAPTF reconciler: read the caches, keep the books, decide, act, report.

One reconcile of one object, level-based: it is told only the key and reads
everything else. Decisions come from `controller.core`; this module only
performs them and writes what they mean to the API server."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from controller.core import approvals, backoff, bookkeeping
from controller.core import status as status_rules
from controller.core.context import Context
from controller.core.decide import context_of, decide
from controller.core.decision import Decision, Idle, Requeue, Run
from controller.core.history import History
from controller.core.inputs import Inputs, InputsMissing, render
from controller.core.jobs import annotations_of, is_finished, name_of
from controller.core.names import ANN_APPROVE, ANN_RESTORE_SERIAL, ANN_SERIAL, FINALIZER, Reason
from controller.core.policy import Policy, PolicyError, RunnerPolicy, read_policy
from controller.core.serials import RESTORE_SERIAL_INVALID, requested_serial, serial_of
from controller.core.snapshot import Snapshot
from controller.core.timefmt import format_time
from controller.io import api, bookkeeper, interrupted
from controller.io.api import Api
from controller.io.bookkeeper import JobMetrics
from controller.io.caches import Caches, parse_key
from controller.io.launcher import Refused, Slots, launch, planned_job_name
from runtime.clock import Clock
from runtime.loop import DONE, Result, requeue_after

log = logging.getLogger(__name__)
Json = dict[str, Any]

# Pending creates older than this are forgotten: the Job was deleted before the cache saw it.
PENDING_TTL = 300.0
# After starting a Job: the Job watch wakes the reconcile; this is only the fallback.
RUNNING_RECHECK = 60.0


@dataclass(frozen=True)
class _Refusal:
    job: str  # the Job the API server refused; the same name while the streak lasts
    count: int  # refusals in a row
    until: datetime  # no new attempt before this
    message: str


@dataclass
class Reconciler:
    client: Api
    caches: Caches
    clock: Clock
    metrics: JobMetrics
    slots: Slots
    runner: RunnerPolicy = field(default_factory=RunnerPolicy)  # the operator's, from flags
    # Job name -> (the owner's uid, when created on the monotonic clock).
    _pending: dict[str, tuple[str, float]] = field(default_factory=dict)
    _deleted: set[str] = field(default_factory=set)  # Jobs this controller deleted itself
    # Object key -> its current streak of refused Jobs (the Job name tells objects of one
    # name apart: it hashes the uid).
    _refusals: dict[str, _Refusal] = field(default_factory=dict)

    async def reconcile(self, key: str) -> Result:
        kind, namespace, name = parse_key(key)
        obj = self.caches.object(kind, namespace, name)
        if obj is None:
            self._refusals.pop(key, None)
            return DONE
        now = self.clock.now()
        obj = await self._ensure_finalizer(obj)
        snap = await self._snapshot(obj)
        policy, inputs = _policy_and_inputs(snap)
        history = History(snap.jobs, snap.plan_readable, snap.redactor)
        snap, status = await self._keep_books(snap, history, policy, inputs, now)
        stored = snap.obj.get("status")  # what the API server has: written only if different
        snap = replace(snap, obj=snap.obj | {"status": status})
        decision = decide(snap, now)
        await self._warn_unusable_restore(snap, stored, now)
        if isinstance(decision, Run):
            decision = self._still_refused(key, snap, decision, now) or decision
        if isinstance(decision, Run) and policy is not None and inputs is not None:
            decision = await self._start(key, snap, decision, inputs, policy, status, now)
        await self._write_status(snap, history, stored, status, decision, policy, inputs, now)
        await self._warn_ignored_approval(snap, now)
        if policy is not None:
            await bookkeeper.mark_capped(self.client, snap, history, policy.failed_limit, now)
        if isinstance(decision, Idle) and decision.reason in (Reason.DESTROYED, Reason.ORPHANED):
            await self._remove_finalizer(snap.obj)
            return DONE
        return _result(decision)

    async def _warn_ignored_approval(self, snap: Snapshot, now: datetime) -> None:
        """One Warning per distinct mistake in captf.io/approve (the Event name is derived
        from it, so every later pass finds it already recorded)."""
        if not snap.annotations.get(ANN_APPROVE):
            return
        ctx = context_of(snap, now)
        why = None if isinstance(ctx, Requeue) else approvals.ignored_approval(ctx)
        if why is None:
            return
        name = f"{snap.name}.{approvals.REASON.lower()}-{approvals.event_suffix(why)}"
        body = api.event_body(
            snap.obj, name, type_="Warning", reason=approvals.REASON, message=why, now=now
        )
        await api.record_event(self.client, body)

    async def _keep_books(
        self,
        snap: Snapshot,
        history: History,
        policy: Policy | None,
        inputs: Inputs | None,
        now: datetime,
    ) -> tuple[Snapshot, Json]:
        """What the Jobs that exist say happened: accounting, the active Job's fate, pruning.
        Returns the snapshot as it now stands and the status to build on."""
        snap = await self._record_restore_attempt(snap, history)
        accounted = await bookkeeper.account(self.client, snap, history, self.metrics, now)
        status = dict(snap.status)
        # A finished Job is no longer active: just accounted, or accounted by a pass whose
        # status write failed afterwards.
        if status.get("activeJob") in {r.name for r in history}:
            status.pop("activeJob")
        _note_restore(status, snap, accounted)
        await self._settle_active(snap, status, inputs, now)
        if policy is not None:
            pruned = await bookkeeper.prune(
                self.client,
                snap,
                history,
                failed_limit=policy.failed_limit,
                successful_limit=policy.successful_limit,
            )
            self._deleted.update(pruned)
        return snap, status

    async def _settle_active(
        self, snap: Snapshot, status: Json, inputs: Inputs | None, now: datetime
    ) -> None:
        """Keeps status.activeJob naming the Job that runs: a Job that vanished while it ran
        is recorded and dropped; a running Job the status never named is adopted."""
        missing = await interrupted.check(self.client, snap, set(self._pending))
        if missing is interrupted.Missing.GONE:
            job = str(status.pop("activeJob"))
            await interrupted.record(self.client, snap, inputs, job, self._deleted, now)
            # A Job that never finishes is never accounted: free its Leases here.
            await bookkeeper.release_leases(self.client, snap, job)
            log.warning(
                "%s/%s: Job %s disappeared while it ran",
                snap.kind,
                snap.name,
                job,
                extra={"fields": {"job": job}},
            )
        if not status.get("activeJob"):
            # Created by a pass that stopped before its status write: adopt it, so that
            # its disappearance is noticed too.
            adopted = _running_job(snap)
            if adopted is not None:
                status["activeJob"] = adopted

    async def _start(
        self,
        key: str,
        snap: Snapshot,
        run: Run,
        inputs: Inputs,
        policy: Policy,
        status: Json,
        now: datetime,
    ) -> Decision:
        """Launches the run; returns it, or the wait that replaces it (the cluster's
        operation Lease, read live, says wait; or the API server refused the Job)."""
        try:
            job = await launch(
                self.client, snap, run, inputs=inputs, policy=policy, slots=self.slots, now=now
            )
        except Refused as refused:
            return await self._refused(key, snap, run, refused, policy, now)
        if isinstance(job, Requeue):
            return job
        self._refusals.pop(key, None)
        self._pending[job] = (snap.obj["metadata"]["uid"], self.clock.monotonic())
        status["activeJob"] = job
        log.info(
            "%s: started %s (%s, retry %d)",
            key,
            job,
            run.reason,
            run.retry,
            extra={"fields": {"job": job}},
        )
        return run

    async def _refused(
        self, key: str, snap: Snapshot, run: Run, refused: Refused, policy: Policy, now: datetime
    ) -> Requeue:
        """The wait after the API server refused a Job: backed off like a failed Job, with one
        Warning Event and one log line per streak. The streak is the refused Job's name:
        it stays the same until a Job of the object is created, and the Event is named
        after it, so a restarted controller does not announce the same streak again."""
        last = self._refusals.get(key)
        count = last.count + 1 if last is not None and last.job == refused.job else 1
        message = f"the API server refused Job {refused.job}: {refused.error.message}"
        wait = backoff.delay(count, policy.failed_limit)
        until = now + timedelta(seconds=wait)
        self._refusals[key] = _Refusal(refused.job, count, until, message)
        if count == 1:
            body = api.event_body(
                snap.obj,
                f"{refused.job}.jobrefused",
                type_="Warning",
                reason=Reason.JOB_REFUSED,
                message=message,
                now=now,
            )
            await api.record_event(self.client, body)
            fields = {"job": refused.job}
            log.warning("%s/%s: %s", snap.kind, snap.name, message, extra={"fields": fields})
        return Requeue(Reason.JOB_REFUSED, wait, op=run.op, message=message)

    def _still_refused(self, key: str, snap: Snapshot, run: Run, now: datetime) -> Requeue | None:
        """The refusal wait, while it lasts and the same Job would be tried again: a pass
        woken by anything else (its own status write) must not ask again before then."""
        last = self._refusals.get(key)
        if last is None or now >= last.until or last.job != planned_job_name(snap, run.op):
            return None
        wait = (last.until - now).total_seconds()
        return Requeue(Reason.JOB_REFUSED, wait, op=run.op, message=last.message)

    def creating(self) -> set[str]:
        """Jobs this process created that the cache may not show yet."""
        return set(self._pending)

    async def _snapshot(self, obj: Json) -> Snapshot:
        await self.caches.load_contents(obj)
        uid = obj["metadata"]["uid"]
        seen = {j["metadata"]["name"] for j in self.caches.jobs_of(uid)}
        mine = pending_of(self._pending, uid, seen, self.clock.monotonic())
        snap = self.caches.snapshot(obj, pending_jobs=mine, max_concurrent_runs=self.slots.count)
        return replace(snap, runner=self.runner)

    async def _record_restore_attempt(self, snap: Snapshot, history: History) -> Snapshot:
        """Writes status.lastRestoredSerial for a finished restore Job before the Job is
        accounted. Once accounted, the status is the only record that the serial was tried:
        were the status write lost after the accounting (a crash, a conflict), the restore
        would run again."""
        tried = bookkeeper.restored_serial(bookkeeping.unaccounted(history))
        if requested_serial(snap.annotations) is None or tried is None:
            return snap
        if snap.status.get("lastRestoredSerial") == tried:
            return snap
        status = snap.status | {"lastRestoredSerial": tried}
        updated = await api.put_status(self.client, snap.obj, status)
        obj = {"apiVersion": snap.obj["apiVersion"], "kind": snap.kind} | updated
        return replace(snap, obj=obj)

    async def _warn_unusable_restore(
        self, snap: Snapshot, stored: Json | None, now: datetime
    ) -> None:
        """One Warning for a restore annotation that names no serial, before the status
        write that shows it: once written, later passes see it there and stay quiet. The
        Event's name is fixed by the object and the text, so a retried pass, or another
        replica, cannot record it twice."""
        warning = status_rules.restore_warning(stored, snap)
        if warning is None:
            return
        text = f"{snap.obj['metadata'].get('uid', '')}/{snap.annotations[ANN_RESTORE_SERIAL]}"
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        body = api.event_body(
            snap.obj,
            f"{snap.name[:200]}.restoreserial.{digest}",
            type_="Warning",
            reason=RESTORE_SERIAL_INVALID,
            message=warning,
            now=now,
        )
        await api.record_event(self.client, body)

    async def _ensure_finalizer(self, obj: Json) -> Json:
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp") or FINALIZER in finalizers:
            return obj
        path = api.object_path(obj["kind"], meta["namespace"], meta["name"])
        patch = {"metadata": {"finalizers": [*finalizers, FINALIZER]}}
        updated = await api.merge_patch(self.client, path, patch, version=meta["resourceVersion"])
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"]} | updated

    async def _remove_finalizer(self, obj: Json) -> None:
        meta = obj["metadata"]
        kept = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        path = api.object_path(obj["kind"], meta["namespace"], meta["name"])
        await api.merge_patch(
            self.client, path, {"metadata": {"finalizers": kept}}, version=meta["resourceVersion"]
        )
        log.info("%s/%s: destroyed; finalizer removed", meta["namespace"], meta["name"])

    async def _write_status(
        self,
        snap: Snapshot,
        history: History,
        stored: Json | None,
        status: Json,
        decision: Decision,
        policy: Policy | None,
        inputs: Inputs | None,
        now: datetime,
    ) -> None:
        new = _desired_status(snap, history, status, decision, policy, inputs, now)
        if new == stored:
            return
        if snap.obj["metadata"].get("deletionTimestamp") and not snap.obj["metadata"].get(
            "finalizers"
        ):
            return
        await api.put_status(self.client, snap.obj, new)


def _running_job(snap: Snapshot) -> str | None:
    running = sorted(name_of(job) for job in snap.jobs if not is_finished(job))
    return running[0] if running else None


def pending_of(
    pending: dict[str, tuple[str, float]], uid: str, seen: set[str], now: float
) -> frozenset[str]:
    """The Jobs created for the object `uid` that its cache does not show yet.

    Forgets those the cache now shows (`seen`) and those older than PENDING_TTL. Matched
    by owner, not by name prefix: cluster "example" must not wait for a Job of pool
    "example-workers"."""
    for job, (owner, created) in list(pending.items()):
        if (owner == uid and job in seen) or now - created > PENDING_TTL:
            del pending[job]
    return frozenset(job for job, (owner, _) in pending.items() if owner == uid)


def _policy_and_inputs(snap: Snapshot) -> tuple[Policy | None, Inputs | None]:
    try:
        policy: Policy | None = read_policy(snap.spec, snap.runner)
    except PolicyError:
        policy = None
    try:
        inputs: Inputs | None = render(snap.spec, snap.configmaps, snap.secrets)
    except InputsMissing:
        inputs = None
    return policy, inputs


def _note_restore(status: Json, snap: Snapshot, accounted: list[Any]) -> None:
    """lastRestoredSerial: set when a restore for the requested serial was attempted, cleared
    when the restore annotation is removed."""
    if requested_serial(snap.annotations) is None:
        status.pop("lastRestoredSerial", None)
        return
    tried = bookkeeper.restored_serial(accounted)
    if tried is not None:
        status["lastRestoredSerial"] = tried


def _desired_status(
    snap: Snapshot,
    history: History,
    status: Json,
    decision: Decision,
    policy: Policy | None,
    inputs: Inputs | None,
    now: datetime,
) -> Json:
    out = dict(status)
    out["observedGeneration"] = snap.obj["metadata"].get("generation", 0)
    out["next"] = _stable_next(snap.status.get("next"), status_rules.next_of(decision, now), now)
    missed = status_rules.missed_window_of(snap.status.get("missedWindow"), decision, now)
    if missed:
        out["missedWindow"] = missed
    else:
        out.pop("missedWindow", None)
    failures = status_rules.failures_of(history)
    if failures:
        out["failures"] = failures
    else:
        out.pop("failures", None)
    if policy is not None and inputs is not None:
        ctx = Context(snap=snap, now=now, policy=policy, inputs=inputs)
        out["inputsHash"] = inputs.hash
        applied = ctx.state_inputs_hash
        if applied:
            out["appliedInputsHash"] = applied
        serial = _state_serial(snap)
        if serial is not None:
            out["stateSerial"] = serial
        new_conditions = status_rules.conditions(ctx, decision)
    else:
        new_conditions = status_rules.conditions_without_inputs(decision, snap)
    out["conditions"] = status_rules.merge_conditions(
        snap.status.get("conditions") or [], new_conditions, now
    )
    return out


def _state_serial(snap: Snapshot) -> int | None:
    state = snap.state_secret
    if state is None:
        return None
    return serial_of(annotations_of(state).get(ANN_SERIAL))


def _stable_next(old: Json | None, new: Json, now: datetime) -> Json:
    """Keeps the old `at` of the same fixed-interval wait (JobRunning, a Lease, a readiness
    wait) while it still lies ahead, so re-deciding does not rewrite the status, and wake
    every watcher, on each pass. Backoffs, windows and schedules have exact times."""
    same = old is not None and (old.get("reason"), old.get("op")) == (
        new.get("reason"),
        new.get("op"),
    )
    reason = str(new.get("reason", ""))
    exact = reason.endswith("Backoff") or reason in (Reason.OUTSIDE_CHANGE_WINDOW, "Idle")
    old_at = old.get("at") if old is not None else None
    if same and not exact and isinstance(old_at, str) and old_at > format_time(now):
        return new | {"at": old_at}
    return new


def _result(decision: Decision) -> Result:
    match decision:
        case Run():
            return requeue_after(RUNNING_RECHECK)
        case Requeue(after=after):
            return requeue_after(max(after, 0.0))
        case Idle(after=after):
            return DONE if after is None else requeue_after(max(after, 0.0))
