"""Accounting a finished Job, as data: its Event, its metric sample, the Leases it frees,
the interrupted-apply records its success ends, and the `captf.io/applied` marker on its
inputs Secret when it left a state. io carries it out
(controller/io/accountant.py), the `captf.io/accounted` mark last. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics.names import (
    ANN_APPLIED,
    ANN_INTERRUPTED_APPLY,
    ANN_RETRY,
    Op,
)
from controller.core.basics.ops import traits
from controller.core.basics.serials import requested_serial, serial_of
from controller.core.decide import triggers
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs import policy_report
from controller.core.jobs.history import Finished, History
from controller.core.jobs.job import Outcome, annotations_of, is_accounted, name_of, result
from controller.core.jobs.job_env import job_env
from controller.core.jobs.run_report import KNOWN_STEPS, step_ok, valid_step
from controller.core.leases import family
from controller.core.leases.family import holder_of
from controller.core.leases.writes import LeaseWrite, Role
from controller.core.plan.last_run import error_kind
from controller.core.spec.refs import cluster_of
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Event:
    """A core/v1 Event about the object; its deterministic name makes it once-only."""

    name: str
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class StepSample:
    """One step of the Job's run, for the step histogram."""

    name: str
    seconds: float
    result: str  # "ok" or "error", by its exit code (run_report.step_ok)


@dataclass(frozen=True)
class Sample:
    """One observation of the attempts histogram (and of the failures counter and the
    step histogram)."""

    uid: str
    kind: str
    op: str
    outcome: str
    attempt: int
    failure: str | None = None  # the Event reason of a counted failure
    # A counted failure's error kind, as status.lastRun shows it ("" when it names none):
    # what tells a throttled fleet (cloud-*) from a broken module.
    error_kind: str = ""
    steps: tuple[StepSample, ...] = ()


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
    # Inputs Secrets to mark captf.io/applied: the Job left a state (docs/deletion.md).
    mark_applied: tuple[str, ...] = ()
    # A Warning PolicyWarning beside the Job's own Event: its plan applied, and a
    # policy's Warn rules matched it.
    warning: Event | None = None


def restored_serial(finished: list[Finished]) -> int | None:
    """The serial of the newest restore Job among `finished`: the restore was attempted."""
    restores = [r for r in finished if r.op == Op.RESTORE]
    if not restores:
        return None
    return requested_serial(annotations_of(max(restores, key=lambda r: r.at).job))


def accounting_of(snap: Snapshot, history: History, record: Finished) -> Accounting:
    verdict = record.verdict
    uid = str(record.job.get("metadata", {}).get("uid") or "")
    said = (verdict.event, verdict.message) if verdict.event else success_event(record)
    event = None
    if said is not None:
        normal = record.outcome in (Outcome.SUCCESS, Outcome.INTERRUPTED)
        name = event_name(record.name, uid, said[0])
        event = Event(name, "Normal" if normal else "Warning", said[0], said[1])
    failed = record.outcome == Outcome.FAILURE
    sample = Sample(
        uid=uid,
        kind=snap.kind,
        op=record.op,
        outcome=record.outcome.value,
        attempt=attempt_number(history, record),
        failure=(verdict.event or "JobFailed") if failed else None,
        error_kind=(error_kind(record) or "") if failed else "",
        steps=steps_of(record.job),
    )
    clear: tuple[str, ...] = ()
    if record.op == Op.APPLY and record.outcome == Outcome.SUCCESS:
        clear = _records_cleared_by(snap, record)
    releases = releases_of(snap, record.name)
    return Accounting(
        record.name,
        uid,
        event,
        sample,
        releases,
        clear,
        _applied_marks(snap, record),
        warning=_policy_warning(snap, record, uid),
    )


POLICY_WARNING = "PolicyWarning"


def _policy_warning(snap: Snapshot, record: Finished, uid: str) -> Event | None:
    """The Warning of an applied plan that a policy's Warn rules matched, naming each
    rule and its addresses, redacted with the values the Job carried."""
    report = policy_report.from_json((result(record.job) or {}).get("policy"))
    if report is None or report.verdict is not policy_report.Verdict.WARNED:
        return None
    said = "; ".join(v.line() for v in report.violations if v.action == "Warn")
    text = snap.redactor(record.job).text(f"applied with policy warnings: {said}")
    return Event(event_name(record.name, uid, POLICY_WARNING), "Warning", POLICY_WARNING, text)


def steps_of(job: Json) -> tuple[StepSample, ...]:
    """The steps the Job's recorded result reports; none when they are not well formed."""
    steps = (result(job) or {}).get("steps")
    if not isinstance(steps, list) or not all(valid_step(s) for s in steps):
        return ()
    return tuple(
        StepSample(
            s["name"] if s["name"] in KNOWN_STEPS else "other",
            float(s["seconds"]),
            "ok" if step_ok(s) else "error",
        )
        for s in steps
    )


def _applied_marks(snap: Snapshot, record: Finished) -> tuple[str, ...]:
    """The Job's inputs Secret, when the Job reports a state serial (it wrote or kept a
    state, success or not) and the Secret is not marked yet."""
    serial = (result(record.job) or {}).get("stateSerial")
    if not traits(record.op).writes_state or not isinstance(serial, int) or serial < 1:
        return ()
    name = job_env(record.job).inputs_secret
    secret = snap.secrets.get(name) if name else None
    if secret is None or annotations_of(secret).get(ANN_APPLIED) == "true":
        return ()
    return (name,)


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
    cluster = cluster_of(snap.obj, snap.related)
    names = [(snap.namespace, family.lease_name(cluster))] if cluster else []
    for lease in snap.leases:
        meta = lease["metadata"]
        same_ns = meta.get("namespace") == snap.namespace
        if holder_of(lease) == job or (same_ns and job in family.member_jobs(lease)):
            names.append((str(meta.get("namespace", "")), str(meta["name"])))
    unique = list(dict.fromkeys(names))
    return tuple(LeaseWrite(ns, name, job, Role.RELEASE) for ns, name in unique)


def released(lease: Json, writes: list[LeaseWrite]) -> Json:
    """The cached Lease as the releases of this pass leave it: the decision sees a slot
    freed by an accounting as free, and a Job started in the same pass takes it."""
    meta = lease["metadata"]
    for write in writes:
        if (write.namespace, write.name) == (meta.get("namespace"), meta["name"]):
            lease = family.release(lease, write.job) or lease
    return lease


def unaccounted(history: History) -> list[Finished]:
    """Finished Jobs not yet accounted, oldest first (Events read in order)."""
    return [r for r in reversed(list(history)) if not is_accounted(r.job)]


def attempt_number(history: History, record: Finished) -> int:
    """The Job's retry number: 1 + the op's counted failures before it since the last success.

    The number stamped on the Job at creation wins: it was computed from the
    Jobs of that moment, before pruning could remove any."""
    stamped = serial_of(annotations_of(record.job).get(ANN_RETRY))
    if stamped:
        return stamped
    earlier = 0
    records = history.of(record.op)  # newest first: the ones after it came before it
    before = records[records.index(record) + 1 :] if record in records else records
    for other in before:
        if other.at > record.at:
            continue
        if other.outcome == Outcome.SUCCESS:
            break
        earlier += other.outcome == Outcome.FAILURE
    return 1 + earlier


def event_name(job: str, uid: str, reason: str) -> str:
    """One Event per Job incarnation: a Job deleted and created again under the same name
    (an operator forgot a failure, so the attempt repeats) is a new object with a new uid,
    and gets its own Event."""
    return f"{job}.{uid}.{reason.lower()}" if uid else f"{job}.{reason.lower()}"


# Failures carry their Event in their classification (controller/core/jobs/job.py);
# successes are named here by op. A refresh, and a drift check that found no drift,
# change nothing a person waits for and get none.
APPLIED = "Applied"
DRIFT_DETECTED = "DriftDetected"
DRIFT_REMEDIATED = "DriftRemediated"
DESTROYED = "Destroyed"
RESTORED = "Restored"
PLAN_READY = "PlanReady"


def success_event(record: Finished) -> tuple[str, str] | None:
    """(reason, message) of a successful Job's Event, or None for no Event."""
    if record.outcome != Outcome.SUCCESS:
        return None
    said = record.verdict.message
    reason = traits(record.op).success_event
    match record.op:
        case Op.APPLY if record.remediation:
            reason = DRIFT_REMEDIATED
        case Op.DRIFT if not (result(record.job) or {}).get("drift"):
            reason = None  # no drift: nothing to announce
        case Op.PLAN:
            said = f"{said}; approve TerraformPlan {record.name} to apply it"
    return None if reason is None else (reason, said)
