"""The CAPTF reconciler: observe, plan once, carry the plan out in one ordered block.

One reconcile of one object, level-based: it is told only the key and reads
everything else. It fills a snapshot from the caches (plus the live reads a
missing active Job needs), asks the core for the plan (controller/core/plan/planner.py),
and performs the plan's writes in the order below. No rule lives here.

The order, and what a crash between two steps leaves (the next pass, from the
state left, plans the rest; every step is idempotent):

  1. finalizer added     Before any Job: a deletion then waits for the destroy.
  2. restore tried       status.lastRestoredSerial before the restore Job is accounted:
                         once accounted, the status is the only record of the attempt.
  3. accounting          Per finished Job: Event (deterministic name: a replay is
                         refused), sample (once per uid in this process), Leases freed
                         (live read, a no-op when already free), records cleared, then
                         the `accounted` mark, the one durable record. A crash before the
                         mark replays the Job's steps; after it, the Job is done.
  4. a vanished Job      The interrupted-apply record, then its Leases. The status still
                         names the Job until step 7, so a crash here finds it gone again,
                         and the record (already there) is not rewritten.
  5. pruning             Only accounted Jobs, so pruning never loses an accounting.
  6. launch              Inputs Secret, Leases, then the Job: no Job runs without its
                         Leases. A crash before the Job leaves Leases held in the name of
                         the Job the same decision names again (deterministic names);
                         were the decision to change, the janitor frees them. A crash
                         after the create: the next pass finds the Job and adopts it.
  7. Events              Before the status that shows what they announce: a pass that
                         finds the status written finds the Event recorded (each is
                         named for what it announces, so a replay is refused).
  8. status              One merge patch, after the Job exists: the status names only
                         Jobs that exist.
  9. label               The retry-capped label, after its RetryCapped Event.
 10. finalizer removed   Last: the object goes once nothing is left to do.

A 409 (a Lease or the object changed meanwhile, a create raced) stops the block and
retries the reconcile through the rate limiter: a conflict is a retry, not an error."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from controller.core.basics.names import FINALIZER
from controller.core.decide.gates import LEASE_WAIT
from controller.core.decide.snapshot import Snapshot
from controller.core.plan.launching import Launch, Refusal, refusal_after, refusal_event
from controller.core.plan.pending import pending_of
from controller.core.plan.planner import Facts, Plan, live_check_needed, plan
from controller.core.spec.policy import RunnerPolicy
from controller.core.spec.sharding import labelled_launch, labelled_secret, shard_labels
from controller.io import accountant, api, interrupted
from controller.io.accountant import JobMetrics
from controller.io.api import Api
from controller.io.caches import Caches
from controller.io.keys import key_of, parse_key
from controller.io.launcher import Refused, launch
from controller.io.leases import LeaseBusy, carry_out
from runtime.clock import Clock
from runtime.errors import ApiError
from runtime.loop import DONE, Result, requeue_after

log = logging.getLogger(__name__)
Json = dict[str, Any]
CONFLICT = Result(requeue=True)


class BeingFreed(Exception):
    """The janitor is freeing Leases held in the name of the Job about to be launched."""


@dataclass(frozen=True)
class Slots:
    namespace: str  # where the run-slot Leases live: the controller's namespace
    count: int  # --max-concurrent-runs


@dataclass
class Reconciler:
    client: Api
    caches: Caches
    clock: Clock
    metrics: JobMetrics
    slots: Slots
    runner: RunnerPolicy = field(default_factory=RunnerPolicy)  # the operator's, from flags
    # The keys of --watch-label-selector: an object's labels of these keys go onto its
    # Jobs and the Secrets written for it (controller/core/spec/sharding.py).
    shard_keys: tuple[str, ...] = ()
    # Job name -> (the owner's uid, when created on the monotonic clock).
    _pending: dict[str, tuple[str, float]] = field(default_factory=dict)
    _deleted: set[str] = field(default_factory=set)  # Jobs this controller deleted itself
    # Launches in flight, and holders the janitor is freeing: never the same name at once.
    _launching: set[str] = field(default_factory=set)
    _freeing: set[str] = field(default_factory=set)
    # Object key -> its current streak of refused Jobs.
    _refusals: dict[str, Refusal] = field(default_factory=dict)

    async def reconcile(self, key: str) -> Result:
        kind, namespace, name = parse_key(key)
        obj = self.caches.object(kind, namespace, name)
        if obj is None:
            self._refusals.pop(key, None)
            return DONE
        snap = await self._snapshot(obj)
        facts = await self._facts(snap)
        now = self.clock.now()
        todo = plan(snap, now, facts)
        try:
            await self._carry_out(snap, todo, now)
        except LeaseBusy:
            return requeue_after(LEASE_WAIT)
        except BeingFreed:
            return CONFLICT
        except Refused as refused:
            await self._refused(snap, refused, now)
            return requeue_after(0.0)  # the next pass shows the wait in the status
        except ApiError as err:
            if err.status == 409:
                return CONFLICT
            raise
        return DONE if todo.requeue is None else requeue_after(todo.requeue)

    async def _carry_out(self, snap: Snapshot, todo: Plan, now: datetime) -> None:
        """The plan's writes, in the order of the module's docstring."""
        obj = snap.obj
        if todo.add_finalizer:
            obj = await _add_finalizer(self.client, obj)
        if todo.restore_tried is not None:
            obj = _typed(obj, await api.patch_status(self.client, obj, todo.restore_tried))
        for accounting in todo.accounts:
            await accountant.account(self.client, obj, accounting, self.metrics, now)
        if todo.gone is not None:
            await self._forget_gone(obj, todo, now)
        for job in todo.prune:
            # No precondition: only finished, accounted Jobs are pruned, and nothing
            # changes them any more.
            self._deleted.add(job)
            await api.delete_job(self.client, snap.namespace, job)
        if todo.launch is not None:
            labels = shard_labels(obj, self.shard_keys)
            await self._launch(labelled_launch(todo.launch, labels), now)
            self._refusals.pop(_key(obj), None)
            self._pending[todo.launch.name] = (obj["metadata"]["uid"], self.clock.monotonic())
            _log_start(snap, todo)
        for event in todo.events:
            await accountant.emit(self.client, obj, event, now)
        if todo.status is not None:
            obj = _typed(obj, await api.patch_status(self.client, obj, todo.status))
        if todo.labels is not None:
            # Only our label's key: a merge patch leaves every other label alone, so a
            # stale read cannot undo anyone's change; no precondition needed.
            patch = {"metadata": {"labels": todo.labels}}
            obj = _typed(obj, await api.merge_patch(self.client, _path(obj), patch))
        if todo.remove_finalizer:
            await _remove_finalizer(self.client, obj)

    async def _forget_gone(self, obj: Json, todo: Plan, now: datetime) -> None:
        gone = todo.gone
        assert gone is not None
        if gone.record is not None:
            labels = shard_labels(obj, self.shard_keys)
            create = labelled_secret(gone.record.create, labels) or gone.record.create
            await interrupted.record(self.client, replace(gone.record, create=create))
        # A Job that never finishes is never accounted: free its Leases here.
        for write in gone.releases:
            await carry_out(self.client, write, now)
        log.warning(
            "%s/%s: Job %s disappeared while it ran",
            obj["kind"],
            obj["metadata"]["name"],
            gone.job,
            extra={"fields": {"job": gone.job}},
        )

    async def _refused(self, snap: Snapshot, refused: Refused, now: datetime) -> None:
        """Remembers the streak of refused Jobs (the next pass plans its wait) and says so
        once per streak."""
        key = _key(snap.obj)
        streak = refusal_after(
            snap, self._refusals.get(key), refused.job, refused.error.message, now
        )
        self._refusals[key] = streak
        event = refusal_event(streak)
        if event is not None:
            await accountant.emit(self.client, snap.obj, event, now)
            fields = {"job": refused.job}
            log.warning("%s/%s: %s", snap.kind, snap.name, streak.message, extra={"fields": fields})

    async def _launch(self, start: Launch, now: datetime) -> None:
        if start.name in self._freeing:
            # The janitor is freeing a Lease held in this Job's name: once it is done, the
            # claims read what it left (a rate-limited requeue, as after a conflict).
            raise BeingFreed(start.name)
        self._launching.add(start.name)
        try:
            await launch(self.client, start, now)
        finally:
            self._launching.discard(start.name)

    def creating(self) -> set[str]:
        """Jobs this process is creating, or created and the cache may not show yet."""
        return set(self._pending) | self._launching

    def begin_freeing(self, job: str) -> bool:
        """Whether the janitor may free a Lease held by `job`: not while it is being created
        here; until `end_freeing`, no launch of `job` starts. (One event loop: the check and
        the mark are one step.)"""
        if job in self.creating():
            return False
        self._freeing.add(job)
        return True

    def end_freeing(self, job: str) -> None:
        self._freeing.discard(job)

    async def _snapshot(self, obj: Json) -> Snapshot:
        uid = obj["metadata"]["uid"]
        jobs = self.caches.jobs_of(uid)
        await self.caches.load_contents(obj, jobs)
        seen = {j["metadata"]["name"] for j in jobs}
        self._pending, mine = pending_of(self._pending, uid, seen, self.clock.monotonic())
        snap = self.caches.snapshot(
            obj, jobs, pending_jobs=mine, max_concurrent_runs=self.slots.count
        )
        return replace(snap, runner=self.runner)

    async def _facts(self, snap: Snapshot) -> Facts:
        """What the plan needs beyond the caches: the live reads behind a missing active Job."""
        missing = live_check_needed(snap)
        gone = missing is not None and await interrupted.confirmed_gone(self.client, snap, missing)
        return Facts(
            active_gone=gone,
            deleted_by_us=frozenset(self._deleted),
            slot_namespace=self.slots.namespace,
            refusal=self._refusals.get(_key(snap.obj)),
        )


def _key(obj: Json) -> str:
    meta = obj["metadata"]
    return key_of(obj["kind"], meta["namespace"], meta["name"])


def _path(obj: Json) -> str:
    meta = obj["metadata"]
    return api.object_path(obj["kind"], meta["namespace"], meta["name"])


async def _add_finalizer(client: Api, obj: Json) -> Json:
    """A merge patch replaces the list whole: the version read is the precondition, so a
    finalizer another party added meanwhile is never dropped."""
    meta = obj["metadata"]
    finalizers = [*(meta.get("finalizers") or []), FINALIZER]
    patch = {"metadata": {"finalizers": finalizers}}
    return _typed(
        obj, await api.merge_patch(client, _path(obj), patch, version=meta["resourceVersion"])
    )


def _typed(obj: Json, updated: Json) -> Json:
    """The object as a write returned it, its kind as the cache's copy says."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"]} | updated


async def _remove_finalizer(client: Api, obj: Json) -> None:
    """As when adding: the whole list, over the version read."""
    meta = obj["metadata"]
    kept = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
    patch = {"metadata": {"finalizers": kept}}
    await api.merge_patch(client, _path(obj), patch, version=meta["resourceVersion"])
    log.info("%s/%s: destroyed; finalizer removed", meta["namespace"], meta["name"])


def _log_start(snap: Snapshot, todo: Plan) -> None:
    assert todo.launch is not None
    job = todo.launch.name
    decision = todo.decision
    log.info(
        "%s/%s/%s: started %s (%s, retry %s)",
        snap.kind,
        snap.namespace,
        snap.name,
        job,
        getattr(decision, "reason", ""),
        getattr(decision, "retry", ""),
        extra={"fields": {"job": job}},
    )
