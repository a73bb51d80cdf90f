"""Deletion: which policy applies, what the state allows, and the rules that end or hold
a deletion without a Job (docs/deletion.md).

The promise: a destroy runs only against a state the controller can read, and the
finalizer comes off only when nothing can be left running untracked by it (a destroy
succeeded, the object never left a state, Retain kept the state for a later object), or
when an operator abandons the infrastructure by naming the object's uid.

"Applied before" must be known without status, which a lost status or `clusterctl move`
drops: `applied_before` reads the marker on the durable inputs Secrets
(`captf.io/applied`, written when a Job that left a state is accounted), the state's
backups, the Jobs' results, and status.stateSerial, and any one of them is enough."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics.names import (
    ANN_ABANDON,
    ANN_APPLIED,
    ANN_RESTORE_SERIAL,
    ANN_SERIAL,
    CLUSTER,
    DATA_KEYS,
    FINALIZER,
    LABEL_RETAINED_FROM,
    LABEL_RETAINED_UID,
    STATE_KEY,
    STATE_MANIFEST_KEY,
    Op,
    Reason,
    state_part_names,
)
from controller.core.basics.serials import serial_of
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Idle, Requeue
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import Outcome, annotations_of, labels_of, result
from controller.core.spec.policy import PolicyError, read_deletion_policy
from controller.core.spec.refs import cluster_of, spec_of
from runtime.jsonobj import Json

# A held deletion looks again every minute; the restore or abandon annotation, or the
# state Secret coming back, wakes it sooner.
HELD_WAIT = 60.0
RETAINED_WAIT = 600.0  # the spec change that adopts, or the Secrets' removal, wakes sooner
DELETE, RETAIN = "Delete", "Retain"


def deletion_policy(ctx: Context) -> str:
    """The object's deletionPolicy; a pool or machine without one takes its cluster's (a
    cluster that is not there, or whose own policy cannot be read, gives Delete)."""
    if ctx.policy.deletion is not None:
        return ctx.policy.deletion
    if ctx.snap.kind == CLUSTER:
        return DELETE
    cluster = ctx.snap.related.get((CLUSTER, cluster_of(ctx.snap.obj, ctx.snap.related)))
    try:
        inherited = read_deletion_policy(spec_of(cluster)) if cluster else None
    except PolicyError:
        inherited = None
    return inherited or DELETE


def applied_before(ctx: Context) -> str | None:
    """What shows that a Job of this object left a state, or None: then no state Secret
    means there is nothing to destroy."""
    snap = ctx.snap
    for secret in snap.inputs_secrets():
        if annotations_of(secret).get(ANN_APPLIED) == "true":
            return f"inputs Secret {_name(secret)} is marked {ANN_APPLIED}"
    backups = snap.backups()
    if backups:
        return f"{len(backups)} state backup(s) exist"
    for record in ctx.history:
        serial = (result(record.job) or {}).get("stateSerial")
        if record.op != Op.DESTROY and isinstance(serial, int) and serial > 0:
            return f"Job {record.name} left state serial {serial}"
    serial = snap.status.get("stateSerial")
    if isinstance(serial, int) and not isinstance(serial, bool) and serial > 0:
        return f"status.stateSerial is {serial}"
    return None


def unreadable(ctx: Context) -> str | None:
    """Why the state Secret cannot be read, from what the snapshot shows without fetching
    it: its serial annotation, and its keys (the cache keeps a state's key list; a Secret
    shown without data says nothing about them)."""
    state = ctx.snap.state_secret
    if state is None:
        return None
    problem = ctx.state_serial_problem()
    if problem is not None:
        return problem
    # The cache's key list first: the data it keeps of a state is only its contract
    # outputs. A state from a file or a live read shows its data whole.
    data = state.get("data")
    keys = state.get(DATA_KEYS, list(data) if isinstance(data, dict) else None)
    if isinstance(keys, list) and STATE_KEY not in keys and STATE_MANIFEST_KEY not in keys:
        shown = ctx.snap.state_shown
        return f"state Secret {shown} has no {STATE_KEY} key (nor a {STATE_MANIFEST_KEY})"
    # Its parts, by the names its annotation gives (their data is the runner's to check).
    parts = state_part_names(ctx.snap.state_shown, annotations_of(state))
    missing = [part for part in parts if part not in ctx.snap.secrets]
    if missing:
        return f"state Secret {ctx.snap.state_shown} names part {missing[0]}, which is missing"
    return None


def trouble(ctx: Context) -> str | None:
    """Why a destroy cannot run against the state: unreadable, or gone after an apply."""
    problem = unreadable(ctx)
    if problem is not None:
        return problem
    if ctx.snap.state_secret is not None:
        return None
    shown = applied_before(ctx)
    if shown is None:
        return None
    return f"state Secret {ctx.snap.state_shown} is gone, and {shown}"


def newest_backup(snap: Snapshot) -> int | None:
    serials = [serial_of(annotations_of(b).get(ANN_SERIAL)) for b in snap.backups()]
    found = [s for s in serials if s is not None]
    return max(found) if found else None


@dataclass(frozen=True)
class Retained:
    """Secrets another object of this kind and name kept with deletionPolicy Retain."""

    uid: str
    source: str  # `<kind>.<name>`
    secrets: tuple[str, ...]


def retained_by_other(snap: Snapshot) -> Retained | None:
    """The state, backups or inputs Secrets labelled as retained by another uid."""
    found: list[tuple[str, str, str]] = []
    for secret in own_secrets(snap):
        marks = labels_of(secret)
        uid = marks.get(LABEL_RETAINED_UID)
        if uid and uid != snap.uid:
            found.append((uid, marks.get(LABEL_RETAINED_FROM, ""), _name(secret)))
    if not found:
        return None
    uid, source, _ = found[0]
    return Retained(uid, source, tuple(name for u, _, name in found if u == uid))


def own_secrets(snap: Snapshot) -> list[Json]:
    """What a deletion with Retain keeps: the state, its backups, the durable inputs."""
    state = snap.state_secret
    return [*([state] if state is not None else []), *snap.backups(), *snap.inputs_secrets()]


def abandoned(ctx: Context) -> bool:
    return bool(ctx.snap.uid) and ctx.snap.annotations.get(ANN_ABANDON) == ctx.snap.uid


def _name(secret: Json) -> str:
    return str(secret.get("metadata", {}).get("name", ""))


# The steps (controller/core/decide/steps.py orders them).


def deleted(ctx: Context) -> Decision | None:
    """Nothing left to do: not our finalizer any more, or a destroy succeeded."""
    if not ctx.snap.deleting:
        return None
    if FINALIZER not in (ctx.snap.obj["metadata"].get("finalizers") or []):
        return Idle(None, Reason.DELETING, "deleting; nothing left to destroy")
    last = ctx.history.newest(Op.DESTROY)
    if last is not None and last.outcome == Outcome.SUCCESS:
        return Idle(None, Reason.DESTROYED, f"destroyed by Job {last.name}")
    return None


def not_its_state(ctx: Context) -> Decision | None:
    """A deleting object that never adopted the state another one retained created
    nothing: it goes, and the retained Secrets stay exactly as they are."""
    other = retained_by_other(ctx.snap) if ctx.snap.deleting else None
    if other is None or ctx.policy.adopt_retained_state:
        return None
    message = f"the state was retained from {other.source} uid {other.uid}; left as it is"
    return Idle(None, Reason.DELETING_WITHOUT_STATE, message)


def retain(ctx: Context) -> Decision | None:
    """deletionPolicy Retain: no destroy; the state, backups and inputs stay, labelled
    with this object, for a later object to adopt. Releases a held or failing deletion
    too: nothing is lost."""
    if not ctx.snap.deleting or deletion_policy(ctx) != RETAIN:
        return None
    kept = len(own_secrets(ctx.snap))
    message = (
        f"deletionPolicy Retain: infrastructure left running; {kept} Secret(s) kept, "
        f"labelled {LABEL_RETAINED_UID}={ctx.snap.uid}"
    )
    return Idle(None, Reason.RETAINED, message)


def abandon(ctx: Context) -> Decision | None:
    """`captf.io/abandon: <uid>` on a deletion that is held or whose destroy fails: the
    finalizer goes without a destroy. A deletion whose destroy may yet succeed is
    destroyed anyway."""
    if not (ctx.snap.deleting and abandoned(ctx)):
        return None
    why = trouble(ctx)
    if why is None and ctx.history.failures(Op.DESTROY):
        why = "the last destroy failed"
    if why is None:
        return None
    message = (
        f"{ANN_ABANDON} names this object's uid ({why}): finalizer removed without a "
        "destroy; whatever the module created keeps running, untracked"
    )
    return Idle(None, Reason.ABANDONED, message)


def held(ctx: Context) -> Decision | None:
    """Deleting with a state lost after an apply, or unreadable: no destroy, the
    finalizer stays, and the message says how to leave the hold."""
    if not ctx.snap.deleting:
        return None
    why = trouble(ctx)
    if why is None:
        return None
    return Requeue(Reason.DELETION_HELD, HELD_WAIT, message=f"{why}; {way_out(ctx)}")


def way_out(ctx: Context) -> str:
    serial = newest_backup(ctx.snap)
    restore = (
        f"restore a backup (annotate {ANN_RESTORE_SERIAL}={serial}, the newest), then the "
        "destroy runs"
        if serial is not None
        else "no state backup exists to restore"
    )
    out = (
        f"no destroy runs. To end the hold: {restore}; or abandon the infrastructure, "
        f"which keeps running untracked (annotate {ANN_ABANDON}={ctx.snap.uid})"
    )
    given = ctx.snap.annotations.get(ANN_ABANDON)
    if given is not None and not abandoned(ctx):
        out += f"; {ANN_ABANDON}={given[:40]!r} is not this object's uid"
    return out


def without_state(ctx: Context) -> Decision | None:
    """No state Secret, and nothing shows an apply: there is nothing to destroy."""
    if not ctx.snap.deleting or ctx.snap.state_secret is not None:
        return None
    message = "never applied and no state: nothing to destroy"
    return Idle(None, Reason.DELETING_WITHOUT_STATE, message)


def retained_state(ctx: Context) -> Decision | None:
    """Another object's retained state is never applied over by accident: wait until
    spec.adoptRetainedState says to take it, or the Secrets are removed."""
    other = retained_by_other(ctx.snap)
    if other is None or ctx.policy.adopt_retained_state:
        return None
    message = (
        f"{', '.join(other.secrets)} retained from {other.source} uid {other.uid}: set "
        f"spec.adoptRetainedState: true to adopt them, or delete the Secrets labelled "
        f"{LABEL_RETAINED_UID}={other.uid} to start afresh"
    )
    return Requeue(Reason.RETAINED_STATE_FOUND, RETAINED_WAIT, message=message)
