"""One pass over one object, as data: everything a reconcile does, decided at once.

`plan(snap, now, facts)` reads the snapshot (the caches), the facts io looked up
live, and the time, and returns the Plan: the finished Jobs to account (each with
its Event, its metric sample and the Leases it frees), the Job that disappeared
while it ran, the Jobs to prune, the Job to create (with its inputs Secret and its
Leases), the status, the retry-capped label, the finalizer, the Events, and when to
come back. `decide` is its decision part: the plan decides on the snapshot as its
bookkeeping leaves it. Pure: io carries the plan out, in the order
controller/io/reconciler.py writes down."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from controller.core import approvals, backoff, bookkeeping, family, status, triggers
from controller.core.context import Context
from controller.core.decide import decide
from controller.core.decision import Decision, Idle, Requeue, Run
from controller.core.family import Busy, holder_of
from controller.core.gates import LEASE_WAIT
from controller.core.history import Finished, History
from controller.core.inputs import Inputs, InputsMissing, render
from controller.core.jobs import Outcome, annotations_of, is_finished, name_of, op_of
from controller.core.jobspec import build_job, inputs_secret, inputs_secret_name, next_job
from controller.core.leases import LeaseWrite, Role, change_of
from controller.core.names import (
    ANN_ACCOUNTED,
    ANN_APPROVE,
    ANN_INTERRUPTED_APPLY,
    ANN_INTERRUPTED_APPLY_AT,
    ANN_INTERRUPTED_APPLY_SEQ,
    ANN_RESTORE_SERIAL,
    CLUSTER,
    FINALIZER,
    LABEL_RETRY_CAPPED,
    MUTABLE_KINDS,
    RUN_SLOT_PREFIX,
    Op,
    Reason,
    op_lease_name,
)
from controller.core.policy import Policy, PolicyError, read_policy
from controller.core.serials import RESTORE_SERIAL_INVALID, requested_serial
from controller.core.snapshot import Snapshot
from controller.core.successes import success_event
from controller.core.timefmt import format_time

Json = dict[str, Any]

# The object may go: destroyed, or orphaned by its deletionPolicy.
_LET_GO = frozenset({Reason.DESTROYED, Reason.ORPHANED})
# After starting a Job: the Job watch wakes the reconcile; this is only the fallback.
RUNNING_RECHECK = 60.0


@dataclass(frozen=True)
class Facts:
    """What io learnt beyond its caches before planning."""

    # status.activeJob's Job is NotFound, and the live object still names it (live reads).
    active_gone: bool = False
    # Jobs this process deleted itself (pruned): their disappearance is no interruption.
    deleted_by_us: frozenset[str] = frozenset()
    slot_namespace: str = "default"  # where the run-slot Leases live
    # The object's current streak of Jobs the API server refused (this process's memory).
    refusal: Refusal | None = None


@dataclass(frozen=True)
class Refusal:
    """The API server refused the object's Job `job` `count` times in a row: no new attempt
    before `until`. The streak is the Job's name: it stays the same until a Job of the
    object is created."""

    job: str
    count: int
    until: datetime
    message: str


def refusal_after(
    snap: Snapshot, last: Refusal | None, job: str, why: str, now: datetime
) -> Refusal:
    """The streak once the API server refused the object's `job` (`why`): backed off like
    a failed Job, under the object's failure limit."""
    count = last.count + 1 if last is not None and last.job == job else 1
    policy, _ = _policy_and_inputs(snap)
    wait = backoff.delay(count, policy.failed_limit if policy is not None else 0)
    message = f"the API server refused Job {job}: {why}"
    return Refusal(job, count, now + timedelta(seconds=wait), message)


def refusal_event(refusal: Refusal) -> Event | None:
    """One Warning per streak, named after the refused Job: a restarted controller does
    not announce the same streak again."""
    if refusal.count != 1:
        return None
    return Event(f"{refusal.job}.jobrefused", "Warning", Reason.JOB_REFUSED, refusal.message)


@dataclass(frozen=True)
class Event:
    """A core/v1 Event about the object; its deterministic name makes it once-only."""

    name: str
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Sample:
    """One observation of the attempts histogram (and of the failures counter)."""

    uid: str
    kind: str
    op: str
    outcome: str
    attempt: int
    failure: str | None = None  # the Event reason of a counted failure


@dataclass(frozen=True)
class Accounting:
    """One finished Job accounted: its Event, its sample, its Leases freed, the
    interrupted-apply records its success clears, then the mark on the Job."""

    job: str
    uid: str
    event: Event | None
    sample: Sample
    releases: tuple[LeaseWrite, ...]
    clear_records: tuple[str, ...]  # inputs Secrets whose record to remove


@dataclass(frozen=True)
class Record:
    """An interrupted-apply record: annotations on the durable inputs Secret, created with
    them (`create`) when the cache does not show it."""

    namespace: str
    secret: str
    notes: dict[str, str]
    create: Json | None


@dataclass(frozen=True)
class Gone:
    """The active Job disappeared while it ran: record it, when the rules ask for it, and
    free its Leases."""

    job: str
    record: Record | None
    releases: tuple[LeaseWrite, ...]


@dataclass(frozen=True)
class Launch:
    job: Json
    inputs_secret: Json | None  # created first when the cache does not show it
    claims: tuple[LeaseWrite, ...]  # taken in this order, before the Job

    @property
    def name(self) -> str:
        return name_of(self.job)


@dataclass(frozen=True)
class Plan:
    decision: Decision
    add_finalizer: bool = False
    restore_tried: Json | None = None  # a status patch written before the accounting
    accounts: tuple[Accounting, ...] = ()
    gone: Gone | None = None
    prune: tuple[str, ...] = ()
    launch: Launch | None = None
    status: Json | None = None  # a merge patch of status; None: unchanged
    labels: Json | None = None  # a merge patch of metadata.labels; None: unchanged
    events: tuple[Event, ...] = ()
    remove_finalizer: bool = False
    requeue: float | None = None  # seconds; None: done until something changes
    # The snapshot as bookkeeping leaves it: what the decision read.
    books: Snapshot | None = field(default=None, compare=False)


def live_check_needed(snap: Snapshot) -> str | None:
    """The Job io must look up live before planning: status.activeJob names a Job the cache
    does not show and this process is not creating. Only live reads tell a cache that is
    behind from a Job that is gone (the Job NotFound, and the live status still naming it)."""
    active = snap.status.get("activeJob")
    if not active or active in snap.job_names() or active in snap.pending_jobs:
        return None
    return str(active)


def plan(snap: Snapshot, now: datetime, facts: Facts | None = None) -> Plan:
    facts = facts or Facts()
    policy, inputs = _policy_and_inputs(snap)
    history = History(snap.jobs, snap.plan_readable, snap.redactor)
    todo = bookkeeping.unaccounted(history)
    accounts = tuple(_accounting(snap, history, r) for r in todo)
    gone = _gone(snap, inputs, facts, now)
    books = _books(snap, todo, gone)
    freed = [w for a in accounts for w in a.releases] + list(gone.releases if gone else ())
    books = replace(books, leases=tuple(_released(lease, freed) for lease in books.leases))
    decision = decide(books, now)
    if isinstance(decision, Run):
        decision = _still_refused(books, decision, facts.refusal, now) or decision
    launch = None
    if isinstance(decision, Run) and policy is not None and inputs is not None:
        started = _launch(books, decision, _Launching(policy, inputs, facts.slot_namespace, now))
        if isinstance(started, Requeue):
            decision = started  # the cached Leases say wait
        else:
            launch = started
            books = _with_status(books, books.status | {"activeJob": started.name})
    ctx = Context(books, now, policy, inputs) if policy and inputs else None
    desired = status.desired(books, decision, ctx, now)
    restore_tried = _restore_tried(snap, todo)
    stored = snap.status | (restore_tried or {})
    meta = snap.obj.get("metadata", {})
    deleted = bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")
    return Plan(
        decision=decision,
        add_finalizer=not meta.get("deletionTimestamp") and FINALIZER not in _finalizers(snap),
        restore_tried=restore_tried,
        accounts=accounts,
        gone=gone,
        prune=_prune(snap, books, policy),
        launch=launch,
        status=None if deleted else status.merge_patch(stored, desired),
        labels=_capped_label(books, policy),
        events=(
            _restore_event(books, snap.status)
            + _capped_event(books, policy, now)
            + _approval_event(books, ctx)
        ),
        remove_finalizer=isinstance(decision, Idle) and decision.reason in _LET_GO,
        requeue=requeue_of(decision),
        books=books,
    )


@dataclass(frozen=True)
class _Launching:
    policy: Policy
    inputs: Inputs
    slot_namespace: str
    now: datetime


def _still_refused(
    snap: Snapshot, run: Run, refusal: Refusal | None, now: datetime
) -> Requeue | None:
    """The refusal wait, while it lasts and the same Job would be tried again: a pass woken
    by anything else (its own status write) must not ask again before then."""
    if refusal is None or now >= refusal.until or refusal.job != next_job(snap, run.op)[0]:
        return None
    wait = (refusal.until - now).total_seconds()
    return Requeue(Reason.JOB_REFUSED, wait, op=run.op, message=refusal.message)


def requeue_of(decision: Decision) -> float | None:
    match decision:
        case Run():
            return RUNNING_RECHECK
        case Requeue(after=after):
            return max(after, 0.0)
        case Idle(after=after):
            return None if after is None or decision.reason in _LET_GO else max(after, 0)


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


def _finalizers(snap: Snapshot) -> list[str]:
    return list(snap.obj.get("metadata", {}).get("finalizers") or [])


def _with_status(snap: Snapshot, new: Json) -> Snapshot:
    return replace(snap, obj=snap.obj | {"status": new})


# -- bookkeeping ---------------------------------------------------------------------------


def _books(snap: Snapshot, todo: list[Finished], gone: Gone | None) -> Snapshot:
    """The snapshot as this pass's bookkeeping leaves it: the Jobs accounted, a Job that
    disappeared recorded, and status.activeJob naming the Job that runs. Copies: the
    caches' objects are never written."""
    marked = {r.name for r in todo}
    jobs = tuple(_accounted(j) if name_of(j) in marked else j for j in snap.jobs)
    secrets = dict(snap.secrets)
    if gone is not None and gone.record is not None:
        record = gone.record
        base = secrets.get(record.secret) or record.create or {"metadata": {}}
        notes = annotations_of(base) | record.notes
        secrets[record.secret] = base | {"metadata": base["metadata"] | {"annotations": notes}}
    new = dict(snap.status)
    finished = {name_of(j) for j in snap.jobs if is_finished(j)}
    # A finished Job is no longer active: just accounted, or accounted by a pass whose
    # status write failed afterwards. A Job that disappeared is not active either.
    if new.get("activeJob") in finished or gone is not None:
        new.pop("activeJob", None)
    _note_restore(new, snap, todo)
    if not new.get("activeJob"):
        # Created by a pass that stopped before its status write: adopt it, so that its
        # disappearance is noticed too.
        running = sorted(name_of(j) for j in snap.jobs if not is_finished(j))
        if running:
            new["activeJob"] = running[0]
    return replace(
        snap, obj=snap.obj | {"status": new}, jobs=jobs, secrets=MappingProxyType(secrets)
    )


def _released(lease: Json, writes: list[LeaseWrite]) -> Json:
    """The cached Lease as the releases of this pass leave it: the decision sees a slot
    freed by an accounting as free, and a Job started in the same pass takes it."""
    meta = lease["metadata"]
    for write in writes:
        if (write.namespace, write.name) == (meta.get("namespace"), meta["name"]):
            lease = family.release(lease, write.job) or lease
    return lease


def _accounted(job: Json) -> Json:
    meta = job.get("metadata", {})
    notes = annotations_of(job) | {ANN_ACCOUNTED: "true"}
    return job | {"metadata": meta | {"annotations": notes}}


def _note_restore(new: Json, snap: Snapshot, todo: list[Finished]) -> None:
    """lastRestoredSerial: set when a restore for the requested serial was attempted,
    cleared when the restore annotation is removed."""
    if requested_serial(snap.annotations) is None:
        new.pop("lastRestoredSerial", None)
        return
    tried = restored_serial(todo)
    if tried is not None:
        new["lastRestoredSerial"] = tried


def restored_serial(finished: list[Finished]) -> int | None:
    """The serial of the newest restore Job among `finished`: the restore was attempted."""
    restores = [r for r in finished if r.op == Op.RESTORE]
    if not restores:
        return None
    return requested_serial(annotations_of(max(restores, key=lambda r: r.at).job))


def _restore_tried(snap: Snapshot, todo: list[Finished]) -> Json | None:
    """status.lastRestoredSerial, written before the restore Job is accounted: once it is
    accounted, the status is the only record that the serial was tried, and were the
    status write lost after the accounting, the restore would run again."""
    tried = restored_serial(todo)
    if requested_serial(snap.annotations) is None or tried is None:
        return None
    if snap.status.get("lastRestoredSerial") == tried:
        return None
    return {"lastRestoredSerial": tried}


def _accounting(snap: Snapshot, history: History, record: Finished) -> Accounting:
    verdict = record.verdict
    uid = str(record.job.get("metadata", {}).get("uid") or "")
    said = (verdict.event, verdict.message) if verdict.event else success_event(record)
    event = None
    if said is not None:
        normal = record.outcome in (Outcome.SUCCESS, Outcome.INTERRUPTED)
        name = bookkeeping.event_name(record.name, uid, said[0])
        event = Event(name, "Normal" if normal else "Warning", said[0], said[1])
    failed = record.outcome == Outcome.FAILURE
    sample = Sample(
        uid=uid,
        kind=snap.kind,
        op=record.op,
        outcome=record.outcome.value,
        attempt=bookkeeping.attempt_number(history, record),
        failure=(verdict.event or "JobFailed") if failed else None,
    )
    clear: tuple[str, ...] = ()
    if record.op == Op.APPLY and record.outcome == Outcome.SUCCESS:
        clear = _records_cleared_by(snap, record)
    return Accounting(record.name, uid, event, sample, releases_of(snap, record.name), clear)


def _records_cleared_by(snap: Snapshot, applied: Finished) -> tuple[str, ...]:
    """Interrupted-apply records that a successful apply started after them ends."""
    return tuple(
        name_of(secret)
        for secret in snap.inputs_secrets()
        if annotations_of(secret).get(ANN_INTERRUPTED_APPLY)
        and triggers.started_after_record(applied.job, annotations_of(secret)) is not False
    )


def releases_of(snap: Snapshot, job: str) -> tuple[LeaseWrite, ...]:
    """Every Lease that may name the Job. The family's operation Lease comes first, and
    always: a member's entry is written moments before its Job is created and the cache
    may not show it yet, and a stale entry would keep the cluster waiting. A member's
    entry goes before its own Lease: freeing that wakes the waiting cluster, which should
    then find the entry gone."""
    cluster = snap.name if snap.kind == CLUSTER else _cluster_of(snap.obj)
    names = [(snap.namespace, family.lease_name(cluster))] if cluster else []
    for lease in snap.leases:
        meta = lease["metadata"]
        same_ns = meta.get("namespace") == snap.namespace
        if holder_of(lease) == job or (same_ns and job in family.member_jobs(lease)):
            names.append((str(meta.get("namespace", "")), str(meta["name"])))
    unique = list(dict.fromkeys(names))
    return tuple(LeaseWrite(ns, name, job, Role.RELEASE) for ns, name in unique)


def _gone(snap: Snapshot, inputs: Inputs | None, facts: Facts, now: datetime) -> Gone | None:
    if not facts.active_gone:
        return None
    job = str(snap.status.get("activeJob") or "")
    if not job:
        return None
    record = _interrupted_record(snap, inputs, job, facts, now)
    return Gone(job, record, releases_of(snap, job))


def _interrupted_record(
    snap: Snapshot, inputs: Inputs | None, job: str, facts: Facts, now: datetime
) -> Record | None:
    """The record, when the rules ask for one: an apply of a
    cluster or pool that this controller did not delete itself. None also when an earlier
    pass recorded it: rewriting it would move the record past a successor that pass may
    already have started."""
    if job in facts.deleted_by_us or snap.kind not in MUTABLE_KINDS or inputs is None:
        return None
    if op_of({"metadata": {"name": job}}) != Op.APPLY:
        return None
    name = inputs_secret_name(snap.name, inputs)
    cached = snap.secrets.get(name)
    if annotations_of(cached or {}).get(ANN_INTERRUPTED_APPLY) == job:
        return None
    notes = {
        ANN_INTERRUPTED_APPLY: job,
        ANN_INTERRUPTED_APPLY_AT: format_time(now),
        ANN_INTERRUPTED_APPLY_SEQ: str(next_job(snap, Op.APPLY)[1]),
    }
    create = None
    if cached is None:
        new = inputs_secret(snap.obj, inputs)
        notes_on_new = annotations_of(new) | notes
        create = new | {"metadata": new["metadata"] | {"annotations": notes_on_new}}
    return Record(snap.namespace, name, notes, create)


def _prune(snap: Snapshot, books: Snapshot, policy: Policy | None) -> tuple[str, ...]:
    """Accounted Jobs past the limits. The active Job (before and after this pass) and the
    Job the approve annotation names always stay."""
    if policy is None:
        return ()
    keep = frozenset(
        filter(
            None,
            [
                snap.status.get("activeJob"),
                books.status.get("activeJob"),
                snap.annotations.get(ANN_APPROVE),
            ],
        )
    )
    history = History(books.jobs, books.plan_readable, books.redactor)
    doomed = bookkeeping.prune(
        history,
        failed_limit=policy.failed_limit,
        successful_limit=policy.successful_limit,
        keep=keep,
    )
    return tuple(doomed)


def _capped_label(snap: Snapshot, policy: Policy | None) -> Json | None:
    """The `captf.io/retry-capped=<op>` label while an op's failures are at the limit."""
    if policy is None:
        return None
    capped = bookkeeping.capped(
        History(snap.jobs, snap.plan_readable, snap.redactor), policy.failed_limit
    )
    current = (snap.obj.get("metadata", {}).get("labels") or {}).get(LABEL_RETRY_CAPPED)
    wanted = capped.op if capped else None
    return None if current == wanted else {LABEL_RETRY_CAPPED: wanted}


def _capped_event(snap: Snapshot, policy: Policy | None, now: datetime) -> tuple[Event, ...]:
    """One RetryCapped Warning per streak, named after the Job that reached the cap."""
    if policy is None:
        return ()
    history = History(snap.jobs, snap.plan_readable, snap.redactor)
    capped = bookkeeping.capped(history, policy.failed_limit)
    current = (snap.obj.get("metadata", {}).get("labels") or {}).get(LABEL_RETRY_CAPPED)
    if capped is None or current == capped.op:
        return ()
    message = (
        f"{capped.op} failed {len(history.failures(capped.op))} times in a row; "
        f"retrying every 10m until it succeeds"
    )
    return (Event(f"{capped.reached_by}.retrycapped", "Warning", "RetryCapped", message),)


def _restore_event(snap: Snapshot, stored: Json) -> tuple[Event, ...]:
    """One Warning for a restore annotation that names no serial, before the status write
    that shows it: once written, later passes see it there and stay quiet. The Event's name
    is fixed by the object and the text, so a retried pass, or another replica, cannot
    record it twice."""
    warning = status.restore_warning(stored, snap)
    if warning is None:
        return ()
    text = f"{snap.obj['metadata'].get('uid', '')}/{snap.annotations[ANN_RESTORE_SERIAL]}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    name = f"{snap.name[:200]}.restoreserial.{digest}"
    return (Event(name, "Warning", RESTORE_SERIAL_INVALID, warning),)


def _approval_event(snap: Snapshot, ctx: Context | None) -> tuple[Event, ...]:
    """One Warning per distinct mistake in captf.io/approve (the Event name is derived from
    it, so every later pass finds it already recorded)."""
    if ctx is None or not snap.annotations.get(ANN_APPROVE):
        return ()
    why = approvals.ignored_approval(ctx)
    if why is None:
        return ()
    name = f"{snap.name}.{approvals.REASON.lower()}-{approvals.event_suffix(why)}"
    return (Event(name, "Warning", approvals.REASON, why),)


# -- launching -----------------------------------------------------------------------------


def _launch(snap: Snapshot, run: Run, how: _Launching) -> Launch | Requeue:
    """The Job the decision runs, with its inputs Secret and its Leases; or the wait the
    cached Leases impose (the live ones are checked again when io takes them)."""
    name, seq = next_job(snap, run.op)
    claims = _claims(snap, name, how.slot_namespace)
    if not claims or claims[0].role != Role.RUN_SLOT:
        message = f"all {snap.max_concurrent_runs} run slots are held"
        return Requeue(Reason.WAITING_FOR_RUN_LEASE, LEASE_WAIT, message=message)
    for claim in claims:
        change = change_of(claim, _cached(snap, claim), how.now)
        if isinstance(change, Busy):
            return Requeue(change.reason, LEASE_WAIT, message=change.message)
    secret = None
    if inputs_secret_name(snap.name, how.inputs) not in snap.secrets:
        secret = inputs_secret(snap.obj, how.inputs)
    job = build_job(snap.obj, run, inputs=how.inputs, policy=how.policy, seq=seq, name=name)
    return Launch(job, secret, claims)


def _claims(snap: Snapshot, job: str, slot_namespace: str) -> tuple[LeaseWrite, ...]:
    """A run slot, the family's operation Lease, and a member's own operation Lease."""
    own = frozenset(snap.job_names())
    slot = _free_slot(snap, job, slot_namespace)
    if slot is None:
        return ()
    claims = [
        LeaseWrite(
            slot_namespace, slot, job, Role.RUN_SLOT, own=own, holder_namespace=snap.namespace
        )
    ]
    cluster = snap.name if snap.kind == CLUSTER else _cluster_of(snap.obj)
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


def _free_slot(snap: Snapshot, job: str, namespace: str) -> str | None:
    """The run slot already held for `job`, else the first one free (or held by one of the
    object's own Jobs, finished and awaiting release); None when all are held."""
    slots = {
        name_of(lease): lease
        for lease in snap.leases
        if lease["metadata"].get("namespace") == namespace
        and name_of(lease).startswith(RUN_SLOT_PREFIX)
    }
    for name, lease in sorted(slots.items()):
        if holder_of(lease) == job:
            return name
    own = snap.job_names()
    for i in range(snap.max_concurrent_runs):
        name = f"{RUN_SLOT_PREFIX}{i}"
        holder = holder_of(slots.get(name))
        if not holder or holder in own:
            return name
    return None


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


def _cluster_of(obj: Json) -> str:
    return str(((obj.get("spec") or {}).get("clusterRef") or {}).get("name") or "")
