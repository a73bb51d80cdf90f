"""The CAPTF reconciler: observe, facts, plan, carry out.

One reconcile of one object, level-based: it is told only the key and reads
everything else, in four steps:

  observe    the Snapshot from the caches: what the cluster shows.
  facts      this process's memory (controller/io/memory.py) and the live reads a
             missing active Job needs; and, read before the Snapshot is built, the
             results of finished Jobs still only in their pods' termination messages
             (controller/io/results.py): the Snapshot shows each on its Job, as it will
             be once the plan's first write lands, so the whole pass (the plan Secrets
             loaded, the accounting, the decision) reads one view.
             And the module image: the answer to the registry lookup this object's
             plan asked for, while fresh (controller/io/memory.py), else a cached
             answer of another object's, marked as not asked for.
  plan       the core's Plan (controller/core/plan/planner.py) from the Snapshot, the
             Facts and the operator's Settings: every write of the pass, as data.
  carry out  the plan's writes, in the order below. The only rule consulted on the
             way is the live-read check before a Lease write (controller/io/leases.py).

Each pass goes through the core once and through io once. A plan whose Job needs its
module image's reference resolved first (controller/core/decide/pinning.py) waits
`ImageResolving` and starts nothing: of such a plan only the lookup is carried out,
none of its writes, and the key is requeued at once; the next pass plans with the
answer (the same world plans the same writes again, so none is lost) and makes them.

No rule lives here: what a refused create or a Lease found held leads to is the
plan's (a refusal is remembered, and the next pass plans its wait and its Warning;
a Lease held waits the Launch's `if_busy`).

Before the plan, a state and backups under the names before kinds were part of them
are moved (controller/io/state_moves.py), one step a pass, and the pass ends there.

The order, and what a crash between two steps leaves (the next pass, from the
state left, plans the rest; every step is idempotent):

  1. finalizer added     Before any Job: a deletion then waits for the destroy.
  1b. results recorded   Each result read from a pod, on its Job (`captf.io/result`),
                         before the Job is accounted: the accounted Job's annotation is
                         then the one record. A crash before it reads the pod again; a
                         pod gone by then leaves a Job without a result, as before.
  1c. stuck Jobs ended  A Job that cannot start, past its grace: its failed result and
                         a one-second deadline in one patch (the Job controller then fails
                         it); a replay finds the result recorded and patches nothing.
  2. restore tried       status.lastRestoredSerial before the restore Job is accounted:
                         once accounted, the status is the only record of the attempt.
  3. accounting          Per finished Job: Event (deterministic name: a replay is
                         refused), sample (once per uid in this process), Leases freed
                         (live read, a no-op when already free), records cleared, then
                         the `accounted` mark, the one durable record. A crash before the
                         mark replays the Job's steps; after it, the Job is done.
  4. a vanished Job      The interrupted-apply record, then its Leases. The status still
                         names the Job until step 8, so a crash here finds it gone again,
                         and the record (already there) is not rewritten.
  5. pruning             Only accounted Jobs, so pruning never loses an accounting.
  5b. Secret metadata    A Retain's labels (and the inputs' owner taken off), an
                         adoption's; each patch is idempotent and a crash replays it.
  5c. runner RBAC        The namespace's captf-runner ServiceAccount and RoleBinding,
                         when the caches do not show them, before the Job that runs as
                         the account (created or taken over: idempotent).
  6. launch              Inputs Secret, Leases, then the Job: no Job runs without its
                         Leases. A crash before the Job leaves Leases held in the name of
                         the Job the same decision names again (deterministic names);
                         were the decision to change, the janitor frees them. A crash
                         after the create: the next pass finds the Job and adopts it.
  7. Events              Before the status that shows what they announce: a pass that
                         finds the status written finds the Event recorded (each is
                         named for what it announces, so a replay is refused).
  7b. TerraformPlans    The plan a waiting Job gets, each plan's status, the finished
                         ones pruned (plan_writes.py): before the status that names the
                         plan to approve, so the status names only plans that exist.
  8. spec write-back     The contract's spec fields (the endpoint, providerID,
                         providerIDList; the endpoint-source annotation), one merge
                         patch over the version read, before the status that says
                         provisioned: Cluster API never sees provisioned without the
                         id. A crash before it writes nothing (the next pass plans it
                         again from the state); after it, the next pass finds the
                         fields written and plans none; a 409 retries the key.
  9. status              One merge patch, after the Job exists: the status names only
                         Jobs that exist.
 9b. owner mark         The remediation annotations on the owner Machine (decide/
                         remediation.py), after the status and Events that say why; a
                         replay patches the same two keys again. Then a pool's replicas
                         on its MachinePool (plan/replicas.py), guarded by its
                         resourceVersion: a 409 retries the key.
 10. metadata           The retry-capped label, after its RetryCapped Event; the
                         block-move annotation, set once the Job exists and removed
                         once it is accounted (a crash before it: the next pass sets it).
 11. finalizer removed  Last: the object goes once nothing is left to do. Its key's
                         next pass finds it gone, and with it the namespace's last
                         object the runner RBAC goes too (controller/io/runner_rbac.py).

A 409 (a Lease or the object changed meanwhile, a create raced) stops the block and
retries the reconcile through the rate limiter: a conflict is a retry, not an error.
A 404 naming the object itself (deleted while the pass ran) ends the pass: done."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from controller.core import (
    Facts,
    ImageLookup,
    Plan,
    Settings,
    Snapshot,
    live_check_needed,
    module_image,
    plan_pass,
)
from controller.core import state_moves as plan_state_moves
from controller.core.basics.names import CAPI_POOL, FINALIZER
from controller.io import (
    accountant,
    api,
    finalizers,
    interrupted,
    owner_marks,
    plan_writes,
    results,
    runner_rbac,
    state_moves,
)
from controller.io.accountant import JobMetrics
from controller.io.api import Api
from controller.io.caches import Caches
from controller.io.keys import parse_key
from controller.io.launcher import Refused, launch
from controller.io.leases import Known, LeaseBusy, carry_out
from controller.io.memory import BeingFreed, Memory
from controller.io.object_metrics import PassMetrics
from controller.io.registry import ImageRegistry, cached_for
from runtime.clock import Clock
from runtime.errors import ApiError, is_not_found
from runtime.jsonobj import Json
from runtime.loop import DONE, Result, requeue_after

log = logging.getLogger(__name__)
CONFLICT = Result(requeue=True)


@dataclass
class Reconciler:
    client: Api
    caches: Caches
    clock: Clock
    metrics: JobMetrics
    settings: Settings = field(default_factory=Settings)  # the operator's, built once
    memory: Memory = field(init=False)  # this process's, shared with the janitor
    leases: Known = field(init=False)  # the Leases' versions its writes try first
    registry: ImageRegistry | None = None  # module image lookups; default: a new one
    passes: PassMetrics | None = None  # the lease-wait and identity counters; None: none

    def __post_init__(self) -> None:
        self.memory = Memory(self.clock)
        self.leases = Known(self.caches.lease)
        if self.registry is None:
            self.registry = ImageRegistry(self.clock)

    async def reconcile(self, key: str) -> Result:
        kind, namespace, name = parse_key(key)
        obj = self.caches.object(kind, namespace, name)
        if obj is None:
            self.memory.forget(key)
            # The last object of a namespace takes the runner's RBAC with it.
            await runner_rbac.remove_if_unused(self.client, self.caches, namespace)
            return DONE
        snap, found = await self._observe(obj)
        # Before the plan: a state under the names before kinds were part of them is
        # moved (controller/core/plan/state_moves.py), one step a pass; the next pass,
        # which comes at once, reads what this one left.
        if await state_moves.carry_out(self.client, namespace, plan_state_moves(snap)):
            return requeue_after(0.0)
        facts = await self._facts(key, snap, found)
        now = self.clock.now()
        todo = plan_pass(snap, now, settings=self.settings, facts=facts)
        if todo.image_lookup is not None:
            # The plan's lookup alone, none of its writes (the status never says
            # ImageResolving for a lookup that answers): the answer is a fact of the next
            # pass, which comes at once. One pass enters the core once and carries out
            # once; the queue is short enough now that the turn costs a tenth of a
            # second (docs/performance.md, `queue`).
            await self._look_up(key, snap, todo.image_lookup)
            return requeue_after(0.0)
        return await self._carry_out(key, snap, todo, now)

    async def _observe(self, obj: Json) -> tuple[Snapshot, dict[str, str]]:
        """The Snapshot, and the results read from pods that it shows on their Jobs."""
        # One Job list for the pass: the Secrets loaded are those of the Jobs the snapshot
        # shows (a Job that appears meanwhile wakes the object again).
        jobs = self.caches.jobs_of(obj["metadata"]["uid"])
        found = await results.read(self.client, jobs)
        jobs = results.shown(jobs, found)
        # One read list for the pass (the core's reads.py): what is loaded is what is shown.
        reads = self.caches.reads(obj, jobs)
        await self.caches.load_contents(obj, jobs, reads)
        return self.caches.snapshot(obj, jobs, reads), found

    async def _facts(self, key: str, snap: Snapshot, found: dict[str, str]) -> Facts:
        """What the plan needs beyond the caches: the memory, the live reads behind a
        missing active Job, and the results read from pods."""
        pending = self.memory.pending_for(snap.obj["metadata"]["uid"], snap.job_names())
        missing = live_check_needed(snap, pending)
        gone = missing is not None and await interrupted.confirmed_gone(self.client, snap, missing)
        image = module_image(snap.spec)
        assert self.registry is not None
        # The answer this object's plan asked for (asked), else any cached answer for the
        # same reference (peeked: it may only note a moved tag).
        fact = None
        if image is not None:
            asked = self.memory.answer(key, image.reference, deleting=snap.deleting)
            fact = asked or self.registry.peek(image.reference, snap.namespace)
        return Facts(
            pending_jobs=pending,
            active_gone=gone,
            deleted_by_us=self.memory.deleted,
            refusal=self.memory.refusal(key),
            results=found,
            runner=self.caches.runner_facts(snap.namespace),
            image=fact,
        )

    async def _carry_out(self, key: str, snap: Snapshot, todo: Plan, now: datetime) -> Result:
        """The plan's writes, and what the queue does next: the plan's requeue, or what
        stopped the writes."""
        try:
            await self._write(key, snap, todo, now)
        except LeaseBusy as held:
            assert todo.launch is not None  # only a launch's claims find a Lease held
            if self.passes is not None:
                self.passes.lease_busy(snap.obj)
            wait = todo.launch.wait_if_busy(held.busy.reason)
            return CONFLICT if wait is None else requeue_after(wait)
        except BeingFreed:
            # Once the janitor is done, the claims read what it left: a rate-limited
            # requeue, as after a conflict.
            return CONFLICT
        except Refused as refused:
            self._remember(key, snap, refused, now)
            return requeue_after(0.0)  # the next pass plans the wait and the Warning
        except ApiError as err:
            if err.status == 409:
                return CONFLICT
            if _is_gone(err, snap.obj):
                # Deleted while the pass ran (its last finalizer removed by another pass
                # or by hand): nothing is left to write to; the delete event forgets it.
                log.info("%s/%s: gone before the pass's writes ended", snap.kind, snap.name)
                return DONE
            raise
        self._count(snap, todo)
        return DONE if todo.requeue is None else requeue_after(todo.requeue)

    def _count(self, snap: Snapshot, todo: Plan) -> None:
        """A pass that waits, told to the pass counters with the conditions it leaves."""
        # Only waits carry these reasons (a Run's reason is its trigger).
        reason = getattr(todo.decision, "reason", None)
        if self.passes is None or not reason:
            return
        status = todo.status if todo.status is not None else snap.status
        self.passes.waited(snap.obj, reason, status.get("conditions") or [])

    async def _write(self, key: str, snap: Snapshot, todo: Plan, now: datetime) -> None:
        """The plan's writes, in the order of the module's docstring."""
        obj = snap.obj
        if todo.add_finalizer:
            obj = await _add_finalizer(self.client, obj)
        for recorded in todo.results:
            await results.record(self.client, snap.namespace, recorded)
        for ending in todo.end_jobs:
            await results.end(self.client, snap.namespace, ending)
        if todo.restore_tried is not None:
            obj = _typed(obj, await api.patch_status(self.client, obj, todo.restore_tried))
        for accounting in todo.accounts:
            await accountant.account(self.client, obj, accounting, self.metrics, now, self.leases)
        if todo.gone is not None:
            await self._forget_gone(obj, todo, now)
        for job in todo.prune:
            # No precondition: only finished, accounted Jobs are pruned, and nothing
            # changes them any more.
            self.memory.deleting(job)
            await api.delete_job(self.client, snap.namespace, job)
        for change in todo.secret_patches:
            await api.patch_secret(self.client, snap.namespace, change.name, change.patch)
        # The runner's account and its binding before the first Job that runs as it.
        await runner_rbac.provide(self.client, todo.runner_rbac)
        if todo.launch is not None:
            with self.memory.launching(todo.launch.name):
                await launch(self.client, todo.launch, now, self.leases)
            self.memory.launched(key, todo.launch.name, owner=obj["metadata"]["uid"])
            _log_start(snap, todo)
        for event in todo.events:
            await accountant.emit(self.client, obj, event, now)
        if todo.announces_refusal:
            self.memory.announced(key)
        if todo.plan_writes:
            await plan_writes.carry_out(self.client, snap.namespace, todo.plan_writes)
        if todo.spec_patch is not None:
            # Over the version read: a field written once must not overwrite one a user
            # set since the cache's copy.
            version = obj["metadata"]["resourceVersion"]
            updated = await api.merge_patch(
                self.client, _path(obj), todo.spec_patch, version=version
            )
            obj = _typed(obj, updated)
        if todo.status is not None:
            obj = _typed(obj, await api.patch_status(self.client, obj, todo.status))
        if todo.owner_mark is not None:
            marked = await owner_marks.carry_out(self.client, snap.namespace, todo.owner_mark)
            if marked and self.passes is not None:
                self.passes.marked(snap.obj, todo.owner_mark)
        if todo.pool_patch is not None:
            # Guarded by the MachinePool's resourceVersion as read: a change made since
            # (the autoscaler's) is a 409, and the key is retried with the newer object.
            path = api.resource_path(
                api.CAPI_OBJECTS[CAPI_POOL], snap.namespace, todo.pool_patch.machine_pool
            )
            await api.merge_patch(self.client, path, todo.pool_patch.patch)
        if todo.metadata is not None:
            # Only our keys: a merge patch leaves every other label and annotation alone,
            # so a stale read cannot undo anyone's change; no precondition needed.
            patch = {"metadata": todo.metadata}
            obj = _typed(obj, await api.merge_patch(self.client, _path(obj), patch))
        if todo.remove_finalizer:
            await _remove_finalizer(self.client, obj)

    async def _look_up(self, key: str, snap: Snapshot, lookup: ImageLookup) -> None:
        """The plan's registry lookup; its answer is the object's next pass's (asked; see
        controller/io/memory.py)."""
        assert self.registry is not None
        fact = await self.registry.resolve(self.client, lookup)
        self.memory.answered(key, fact, cached_for(fact), deleting=snap.deleting)

    async def _forget_gone(self, obj: Json, todo: Plan, now: datetime) -> None:
        gone = todo.gone
        assert gone is not None
        if gone.record is not None:
            await interrupted.record(self.client, gone.record)
        # A Job that never finishes is never accounted: free its Leases here.
        for write in gone.releases:
            await carry_out(self.client, write, now, self.leases)
        log.warning(
            "%s/%s: Job %s disappeared while it ran",
            obj["kind"],
            obj["metadata"]["name"],
            gone.job,
            extra={"fields": {"job": gone.job}},
        )

    def _remember(self, key: str, snap: Snapshot, refused: Refused, now: datetime) -> None:
        """The refusal, for the next pass's plan; said in the log once per streak."""
        streak = self.memory.refused(key, refused.job, refused.error.message, now)
        if streak.count == 1:
            fields = {"job": refused.job}
            log.warning("%s/%s: %s", snap.kind, snap.name, streak.message, extra={"fields": fields})


def _is_gone(err: ApiError, obj: Json) -> bool:
    """A 404 for the object itself (not for a Job, Secret or Lease a write touched)."""
    resource = api.OBJECTS[obj["kind"]]
    name = obj["metadata"]["name"]
    return is_not_found(err, group=resource.group, plural=resource.plural, name=name)


def _path(obj: Json) -> str:
    meta = obj["metadata"]
    return api.object_path(obj["kind"], meta["namespace"], meta["name"])


async def _add_finalizer(client: Api, obj: Json) -> Json:
    return _typed(obj, await finalizers.add(client, _path(obj), obj, FINALIZER))


def _typed(obj: Json, updated: Json) -> Json:
    """The object as a write returned it, its kind as the cache's copy says."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"]} | updated


async def _remove_finalizer(client: Api, obj: Json) -> None:
    # Gone already (its other finalizers went, or a replayed pass removed ours): the
    # object this step lets go of is gone, which is what the step is for.
    if await finalizers.remove(client, _path(obj), obj, FINALIZER, missing_ok=True):
        meta = obj["metadata"]
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
