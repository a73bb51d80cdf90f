"""The status an object should show: conditions, failures, and what it waits for until when.

Pure: computed from the snapshot, the decision and the time; the reconciler
writes it only when it differs from what is there."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.core.basics.names import (
    ANN_SERIAL,
    BACKOFF_REASONS,
    COND_IDENTITY_ALLOWED,
    MUTABLE_KINDS,
    Op,
    Reason,
)
from controller.core.basics.serials import serial_of, unusable_restore_request
from controller.core.basics.timefmt import format_time
from controller.core.decide import pinning, triggers
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Idle, Requeue, Run
from controller.core.decide.pause import pause_of
from controller.core.decide.runner_rbac import CONDITION as RUNNER_RBAC_CONDITION
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.history import History
from controller.core.jobs.job import (
    FREE_OUTCOMES,
    INVALID_RESULT,
    Outcome,
    annotations_of,
    result,
)
from controller.core.plan import signals
from controller.core.plan.last_run import cloud_note, last_run_of
from controller.core.plan.policy_status import policy_condition
from controller.core.plan.writeback import WriteBack
from controller.core.spec.identity import verdict_of
from controller.core.spec.refs import module_image
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Capacity:
    """A TerraformMachinePool's scale-from-zero part of its status (plan/pool_capacity.py)."""

    fields: Json  # capacity, nodeInfo, capacitySource; None: not shown
    condition: Json  # CapacityResolved, without its transition time


INTERRUPTED_MESSAGE = (
    "Job {job}: disappeared while it ran and may have applied part of its change; "
    "an apply of the current inputs is due"
)


def next_of(decision: Decision, now: datetime) -> Json:
    """status.next: what the controller waits for, and until when."""
    match decision:
        case Run(op=op, reason=reason):
            return {"op": op, "reason": reason, "at": format_time(now)}
        case Requeue(op=op, reason=reason, after=after):
            out: Json = {"op": op} if op else {}
            return out | {"reason": reason, "at": format_time(now + timedelta(seconds=after))}
        case Idle(after=after, reason=reason):
            out = {"reason": reason or "Idle"}
            if after is not None:
                out["at"] = format_time(now + timedelta(seconds=after))
            return out


def missed_window_of(old: Json | None, decision: Decision, now: datetime) -> Json | None:
    """status.missedWindow: the change window an op's retry cannot start inside.

    Set while the window is open and the op's backoff ends after it closes; kept once the
    window has closed, while the same op still waits (its backoff, then the next window),
    so the status still says which window was missed; gone once the op runs or the wait
    is about something else."""
    if isinstance(decision, Requeue) and decision.missed_window is not None:
        opens, closes = decision.missed_window
        return {"op": decision.op, "opens": format_time(opens), "closes": format_time(closes)}
    if not (isinstance(decision, Requeue) and isinstance(old, dict)):
        return None
    same_op_waits = decision.op is not None and old.get("op") == decision.op
    waits = decision.reason in BACKOFF_REASONS or decision.reason == Reason.OUTSIDE_CHANGE_WINDOW
    closed = str(old.get("closes", "")) <= format_time(now)
    return old if same_op_waits and waits and closed else None


def failures_of(history: History) -> Json:
    out: Json = {}
    for op in Op:
        streak = history.failures(op)
        if streak:
            newest = streak[0]
            out[op.value] = {
                "count": len(streak),
                "lastFailedAt": format_time(newest.at),
                # The error, whole as the runner bounded it: a destroy that keeps failing
                # says why here even once its Jobs are pruned (`captf get`, LAST ERROR).
                "message": newest.verdict.message,
            }
    return out


def conditions(ctx: Context, decision: Decision) -> list[Json]:
    """Ready, ApplyJobSucceeded, DriftDetected and Waiting, without transition times."""
    out = [_ready(ctx, decision), _waiting(decision, ctx.snap)]
    applied = _apply_condition(ctx)
    if applied is not None:
        out.append(applied)
    drift = _drift_condition(ctx)
    if drift is not None:
        out.append(drift)
    judged = policy_condition(ctx)
    if judged is not None:
        out.append(judged)
    return out


def conditions_without_inputs(decision: Decision, snap: Snapshot) -> list[Json]:
    """Ready and Waiting when the policy is invalid or the inputs cannot be rendered: not
    Ready, for the reason the decision gives."""
    reason = decision.reason if isinstance(decision, Requeue) else "NotReady"
    message = decision.message if isinstance(decision, Requeue) else ""
    return [_cond("Ready", False, reason, message or reason), _waiting(decision, snap)]


def restore_warning(stored: Json | None, snap: Snapshot) -> str | None:
    """The Warning to record about an unusable restore annotation, once: None when there
    is none, or when the stored Waiting condition already shows it (the pass that first
    wrote it into the status recorded the Warning before that write)."""
    note = unusable_restore_request(snap.annotations)
    if note is None:
        return None
    for cond in (stored or {}).get("conditions") or []:
        if cond.get("type") == "Waiting" and note in str(cond.get("message", "")):
            return None
    return note


def _cond(kind: str, true: bool, reason: str, message: str) -> Json:
    return {
        "type": kind,
        "status": "True" if true else "False",
        "reason": reason,
        "message": message,
    }


def _ready(ctx: Context, decision: Decision) -> Json:
    if ctx.snap.obj.get("metadata", {}).get("deletionTimestamp"):
        return _cond("Ready", False, Reason.DELETING, "the object is being deleted")
    due = triggers.apply_due(ctx)
    if due is not None and due.trigger != Reason.DRIFT_REMEDIATION:
        return _cond("Ready", False, due.trigger, _reason_message(decision) or due.trigger)
    if ctx.snap.kind in MUTABLE_KINDS and ctx.state_inputs_hash != ctx.inputs.hash:
        return _cond("Ready", False, Reason.INPUTS_CHANGED, "the current inputs are not applied")
    if not ctx.state_inputs_hash:
        return _cond("Ready", False, Reason.NO_STATE, "not applied yet")
    return _cond("Ready", True, "Applied", f"inputs {ctx.inputs.hash8} are applied")


def _reason_message(decision: Decision) -> str:
    if isinstance(decision, Requeue | Idle):
        return decision.message
    return ""


def _waiting(decision: Decision, snap: Snapshot) -> Json:
    """Waiting, its message followed by why a restore annotation asks for nothing: the
    decision goes on without it, and the operator must learn why no restore ran."""
    if isinstance(decision, Requeue):
        cond = _cond("Waiting", True, decision.reason, decision.message or decision.reason)
    elif isinstance(decision, Run):
        cond = _cond("Waiting", False, "Running", f"starting {decision.op} ({decision.reason})")
    else:
        cond = _cond("Waiting", False, "Idle", decision.message or "nothing to do")
    note = unusable_restore_request(snap.annotations)
    return cond | {"message": f"{cond['message']}; {note}"} if note else cond


def _apply_condition(ctx: Context) -> Json | None:
    interrupted = triggers.interrupted_apply(ctx)
    if interrupted and ctx.snap.kind in MUTABLE_KINDS:
        return _cond(
            "ApplyJobSucceeded", False, "ApplyFailed", INTERRUPTED_MESSAGE.format(job=interrupted)
        )
    for record in ctx.history.of(Op.APPLY):
        if record.outcome in FREE_OUTCOMES:
            continue
        if record.outcome == Outcome.SUCCESS:
            return _cond("ApplyJobSucceeded", True, "ApplySucceeded", record.verdict.message)
        # A termination message that was no result of the Job's own says so by its reason.
        invalid = record.verdict.event == INVALID_RESULT
        reason = INVALID_RESULT if invalid else "ApplyFailed"
        # The cloud's own error is named first, so who should act reads at a glance.
        note = cloud_note(record)
        message = f"{note}: {record.verdict.message}" if note else record.verdict.message
        return _cond("ApplyJobSucceeded", False, reason, message)
    return None


def _drift_condition(ctx: Context) -> Json | None:
    check = ctx.history.newest(Op.DRIFT, outcome=Outcome.SUCCESS)
    if check is None:
        return None
    if ctx.history.drift_pending():
        message = f"drift check {check.name} found drift"
        if ctx.policy.drift_remediate and not triggers.remediation_due(ctx):
            message += "; remediation stopped at the failure limit until the next drift check"
        return _cond("DriftDetected", True, "DriftDetected", message)
    return _cond("DriftDetected", False, "NoDrift", f"no drift pending after {check.name}")


def outputs_of(history: History) -> list[str] | None:
    """status.outputs: the output names the newest successful apply wrote, or None when
    no apply that is still kept says (the status then keeps what it showed)."""
    applied = history.newest(Op.APPLY, outcome=Outcome.SUCCESS)
    names = (result(applied.job) or {}).get("outputs") if applied is not None else None
    return [str(n) for n in names] if isinstance(names, list) else None


def merge_conditions(old: list[Json], new: list[Json], now: datetime) -> list[Json]:
    """New conditions keep their lastTransitionTime while their status is unchanged."""
    before = {c.get("type"): c for c in old}
    merged = []
    for cond in new:
        prior = before.get(cond["type"])
        when = (
            prior.get("lastTransitionTime")
            if prior and prior.get("status") == cond["status"]
            else None
        )
        merged.append(cond | {"lastTransitionTime": when or format_time(now)})
    return merged


def desired(
    snap: Snapshot,
    decision: Decision,
    ctx: Context | None,
    now: datetime,
    *,
    writeback: WriteBack | None = None,
    runner: Json | None = None,
    image_condition: Json | None = None,
    capacity: Capacity | None = None,
) -> Json:
    """The status the object should show after this pass. `snap.status` is the status as
    bookkeeping leaves it (activeJob, lastRestoredSerial); `ctx` is None when the policy or
    the inputs cannot be read; `writeback` is the contract's part, for an object of a
    contract role (its Ready replaces CAPTF's own); `capacity` a pool's scale-from-zero
    fields and condition (plan/pool_capacity.py)."""
    old = snap.status
    out = dict(old)
    out["observedGeneration"] = snap.obj.get("metadata", {}).get("generation", 0)
    out["next"] = stable_next(old.get("next"), next_of(decision, now), now)
    _set(out, "missedWindow", missed_window_of(old.get("missedWindow"), decision, now))
    history = ctx.history if ctx is not None else snap.history
    _set(out, "failures", failures_of(history))
    _set(out, "lastRun", last_run_of(history, snap.redactor, old.get("lastRun")))
    if not (snap.spec.get("outputs") or {}).get("secretName"):
        out.pop("outputs", None)
    elif (names := outputs_of(history)) is not None:
        out["outputs"] = names
    if ctx is not None:
        out["inputsHash"] = ctx.inputs.hash
        if ctx.state_inputs_hash:
            out["appliedInputsHash"] = ctx.state_inputs_hash
        serial = state_serial(snap)
        if serial is not None:
            out["stateSerial"] = serial
        new_conditions = conditions(ctx, decision)
        new_conditions += signals.conditions(ctx, decision, serial, writeback)
        if writeback is not None:
            new_conditions = _with_contract(out, new_conditions, writeback)
    else:
        new_conditions = conditions_without_inputs(decision, snap)
    if image_condition is not None:
        new_conditions.append(image_condition)
    if capacity is not None:
        for key, value in capacity.fields.items():
            _set(out, key, value)
        new_conditions.append(capacity.condition)
    _image(out, snap, history)
    new_conditions += paused_condition(snap, old.get("conditions") or [])
    new_conditions += identity_condition(snap)
    new_conditions += _runner_condition(runner, old.get("conditions") or [])
    out["conditions"] = merge_conditions(old.get("conditions") or [], new_conditions, now)
    return out


def _runner_condition(runner: Json | None, old: list[Json]) -> list[Json]:
    """RunnerRBACReady as this pass found it; when the pass read nothing of the runner's
    RBAC (its policy unreadable, `captf decide`), as stored."""
    if runner is not None:
        return [runner]
    return [c for c in old if c.get("type") == RUNNER_RBAC_CONDITION]


def _image(out: Json, snap: Snapshot, history: History) -> None:
    """status.image: the module image and digest of the newest Job that ran one; kept
    while no Job kept says; gone with an image source."""
    if module_image(snap.spec) is None:
        out.pop("image", None)
    elif (shown := pinning.status_image(history)) is not None:
        out["image"] = shown


def _with_contract(out: Json, new_conditions: list[Json], writeback: WriteBack) -> list[Json]:
    """The contract's status fields set in `out` (None removes one), and its conditions
    in place of those of the same type."""
    for key, value in writeback.status.items():
        if isinstance(value, dict):
            out[key] = dict(out.get(key) or {}) | value
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    types = {cond["type"] for cond in writeback.conditions}
    return [c for c in new_conditions if c["type"] not in types] + list(writeback.conditions)


def paused_condition(snap: Snapshot, old: list[Json]) -> list[Json]:
    """Paused (True, reason Paused) while Cluster API pauses the object; once it resumes,
    False (NotPaused) if it ever showed, so the transition stays visible. An object never
    paused shows none."""
    why = pause_of(snap)
    if why is not None:
        return [_cond("Paused", True, Reason.PAUSED, why)]
    if any(c.get("type") == "Paused" for c in old):
        return [_cond("Paused", False, "NotPaused", "not paused")]
    return []


def identity_condition(snap: Snapshot) -> list[Json]:
    """IdentityAllowed, for an object that names credentials (or inherits its cluster's):
    True, or False with the reason no Job of it may start (controller/core/spec/identity.py)."""
    ref = snap.identity_ref
    if ref is None:
        return []
    verdict = verdict_of(ref, snap.identity, snap.namespace, snap.secrets)
    return [_cond(COND_IDENTITY_ALLOWED, verdict.allowed, verdict.reason, verdict.message)]


def _set(out: Json, key: str, value: Json | None) -> None:
    if value:
        out[key] = value
    else:
        out.pop(key, None)


def state_serial(snap: Snapshot) -> int | None:
    state = snap.state_secret
    return None if state is None else serial_of(annotations_of(state).get(ANN_SERIAL))


# Waits whose `at` is exact: re-deciding gives the same time, so it is written as computed.
_EXACT = BACKOFF_REASONS | {Reason.OUTSIDE_CHANGE_WINDOW, "Idle"}


def stable_next(old: Json | None, new: Json, now: datetime) -> Json:
    """Keeps the old `at` of the same fixed-interval wait (JobRunning, a Lease, a readiness
    wait) while it still lies ahead, so re-deciding does not rewrite the status, and wake
    every watcher, on each pass. Backoffs, windows and schedules have exact times."""
    same = old is not None and (old.get("reason"), old.get("op")) == (
        new.get("reason"),
        new.get("op"),
    )
    old_at = old.get("at") if old is not None else None
    exact = new.get("reason") in _EXACT
    if same and not exact and isinstance(old_at, str) and old_at > format_time(now):
        return new | {"at": old_at}
    return new


def merge_patch(old: Json, new: Json) -> Json | None:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`; None when they are
    equal. Maps are diffed key by key (a removed key is null); lists are replaced whole."""
    patch: Json = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            inner = merge_patch(before, value)
            if inner is not None:
                patch[key] = inner
        elif before != value or key not in old:
            patch[key] = value
    patch |= {key: None for key in old if key not in new}
    return patch or None
