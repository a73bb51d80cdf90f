"""What a person (or a GitOps tool) watches beyond Ready: three conditions, and one Event
per transition. Pure: from the snapshot, the decision, the status stored and the status
this pass wants.

Conditions (docs/api.md, "Conditions"):
- InputsApplied: the state holds the current inputs (the GitOps "my change landed").
- StateReadable: the state Secret is there and its serial reads; absent before any state.
- EndpointAvailable (TerraformCluster of the contract): spec.controlPlaneEndpoint is set.

Events are named `<object>.<what>.<digest>`, the digest of the object's uid and what
identifies the transition in the status as stored (not the time of this pass). A pass
replayed after a crash before its status write computes the same name, and the second
create is refused: each transition is told once, across replays, restarts and replicas.
After the status write, the next pass sees no transition and names nothing."""

from __future__ import annotations

import hashlib
from typing import Final

from controller.core.basics.names import Reason
from controller.core.contract.sources import valid_endpoint
from controller.core.decide import remediation
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Requeue, Run
from controller.core.decide.remediation import OwnerMark
from controller.core.decide.snapshot import Snapshot
from controller.core.plan import replicas
from controller.core.plan.accounting import Event
from controller.core.plan.health_watched import health_watched
from controller.core.plan.replicas import PoolPatch
from controller.core.plan.writeback import WriteBack
from runtime.jsonobj import Json

INPUTS_APPLIED: Final = "InputsApplied"
STATE_READABLE: Final = "StateReadable"
ENDPOINT_AVAILABLE: Final = "EndpointAvailable"
# The waits that say the state cannot be read (or is gone): StateReadable False.
_STATE_WAITS: Final = frozenset({Reason.STATE_UNREADABLE, Reason.STATE_LOST, Reason.DELETION_HELD})
CLUSTER_KIND: Final = "TerraformCluster"

# Event reasons.
PAUSED: Final = "Paused"
RESUMED: Final = "Resumed"
PROVIDER_ID_SET: Final = "ProviderIDSet"
ENDPOINT_SET: Final = "EndpointSet"
DIGEST_PINNED: Final = "DigestPinned"
PLAN_AWAITS_APPROVAL: Final = "PlanAwaitsApproval"
APPROVED_PLAN_APPLYING: Final = "ApprovedPlanApplying"
MEMBERSHIP_CHANGED: Final = "MembershipChanged"


def _cond(kind: str, true: bool, reason: str, message: str) -> Json:
    status = "True" if true else "False"
    return {"type": kind, "status": status, "reason": reason, "message": message}


def conditions(
    ctx: Context, decision: Decision, state_serial: int | None, writeback: WriteBack | None
) -> list[Json]:
    """InputsApplied, StateReadable (once there is a state or a wait about it), for a
    contract cluster EndpointAvailable, and for a contract machine HealthWatched
    (controller/core/plan/health_watched.py)."""
    out = [inputs_applied(ctx)]
    state = state_readable(decision, state_serial)
    if state is not None:
        out.append(state)
    endpoint = endpoint_available(ctx, writeback)
    if endpoint is not None:
        out.append(endpoint)
    watched = health_watched(ctx, decision)
    if watched is not None:
        out.append(watched)
    return out


def inputs_applied(ctx: Context) -> Json:
    applied, current = ctx.state_inputs_hash, ctx.inputs.hash
    generation = ctx.snap.obj.get("metadata", {}).get("generation", 0)
    if applied == current:
        message = f"inputs {ctx.inputs.hash8} of generation {generation} are in the state"
        return _cond(INPUTS_APPLIED, True, INPUTS_APPLIED, message)
    if not applied:
        return _cond(INPUTS_APPLIED, False, "NotApplied", "no apply has recorded inputs yet")
    message = (
        f"the state holds inputs {applied[:8]}; generation {generation} has {ctx.inputs.hash8}"
    )
    return _cond(INPUTS_APPLIED, False, "InputsPending", message)


def state_readable(decision: Decision, serial: int | None) -> Json | None:
    if isinstance(decision, Requeue) and decision.reason in _STATE_WAITS:
        return _cond(STATE_READABLE, False, decision.reason, decision.message or decision.reason)
    if serial is not None:
        return _cond(STATE_READABLE, True, STATE_READABLE, f"the state's serial is {serial}")
    return None


def _endpoint(ctx: Context, writeback: WriteBack | None) -> Json | None:
    """The cluster's endpoint after this pass: the spec's (its own write-back included),
    else the one the Cluster was given (then the module's is not written)."""
    pending = ((writeback.spec if writeback else None) or {}).get("spec") or {}
    given = (ctx.inputs.contract or {}).get("control_plane_endpoint")
    return (
        valid_endpoint(pending.get("controlPlaneEndpoint"))
        or valid_endpoint(ctx.snap.spec.get("controlPlaneEndpoint"))
        or valid_endpoint(given)
    )


def endpoint_available(ctx: Context, writeback: WriteBack | None) -> Json | None:
    if ctx.snap.kind != CLUSTER_KIND or writeback is None:
        return None
    endpoint = _endpoint(ctx, writeback)
    if endpoint is None:
        message = "the cluster module has not reported control_plane_endpoint yet"
        return _cond(ENDPOINT_AVAILABLE, False, "EndpointNotSet", message)
    message = f"spec.controlPlaneEndpoint is {endpoint['host']}:{endpoint['port']}"
    return _cond(ENDPOINT_AVAILABLE, True, ENDPOINT_SET, message)


# -- Events ---------------------------------------------------------------------------


def _name(snap: Snapshot, what: str, *key: object) -> str:
    text = "/".join([str(snap.obj.get("metadata", {}).get("uid", "")), *map(str, key)])
    return f"{snap.name[:200]}.{what}.{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _condition(status: Json, kind: str) -> Json:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return {}


def events(
    snap: Snapshot, decision: Decision, stored: Json, desired: Json, spec_patch: Json | None
) -> tuple[Event, ...]:
    """The transitions this pass makes, each as one Event (see the module docstring)."""
    return (
        *_pause(snap, stored, desired),
        *_written(snap, spec_patch),
        *_members(snap, spec_patch),
        *_digest(snap, stored, desired),
        *_plan(snap, decision, stored, desired),
    )


def _pause(snap: Snapshot, stored: Json, desired: Json) -> tuple[Event, ...]:
    old, new = _condition(stored, "Paused"), _condition(desired, "Paused")
    was, now = old.get("status") == "True", new.get("status") == "True"
    if was == now or not new:
        return ()
    reason = PAUSED if now else RESUMED
    message = new.get("message", "") if now else "resumed: new Jobs may start"
    name = _name(snap, reason.lower(), old.get("lastTransitionTime", ""), new.get("status"))
    return (Event(name, "Normal", reason, message),)


def _written(snap: Snapshot, spec_patch: Json | None) -> tuple[Event, ...]:
    spec = (spec_patch or {}).get("spec") or {}
    out: list[Event] = []
    if spec.get("providerID"):
        provider_id = str(spec["providerID"])
        name = _name(snap, "providerid", provider_id)
        out.append(Event(name, "Normal", PROVIDER_ID_SET, f"spec.providerID set to {provider_id}"))
    endpoint = valid_endpoint(spec.get("controlPlaneEndpoint"))
    if endpoint is not None:
        where = f"{endpoint['host']}:{endpoint['port']}"
        name = _name(snap, "endpoint", where)
        out.append(Event(name, "Normal", ENDPOINT_SET, f"spec.controlPlaneEndpoint set to {where}"))
    return tuple(out)


def _members(snap: Snapshot, spec_patch: Json | None) -> tuple[Event, ...]:
    """A pool's member set written anew (a refresh or an apply read other providerIDs than
    spec.providerIDList holds), told by counts only. A reordering changes no member and
    tells nothing. The name carries the generation the write changes and the new set, so
    a replay before the write names the same Event, and a set that comes back later (a
    newer generation) is told again."""
    new = ((spec_patch or {}).get("spec") or {}).get("providerIDList")
    if not isinstance(new, list):
        return ()
    before, after = set(snap.spec.get("providerIDList") or []), set(new)
    added, removed = len(after - before), len(before - after)
    if not added and not removed:
        return ()
    generation = snap.obj.get("metadata", {}).get("generation", 0)
    name = _name(snap, "members", generation, *sorted(after))
    count = f"{len(after)} member" + ("" if len(after) == 1 else "s")
    message = f"membership changed: {added} added, {removed} removed; {count}"
    return (Event(name, "Normal", MEMBERSHIP_CHANGED, message),)


def _digest(snap: Snapshot, stored: Json, desired: Json) -> tuple[Event, ...]:
    old = (stored.get("image") or {}).get("digest")
    new_image = desired.get("image") or {}
    new = new_image.get("digest")
    if not new or new == old:
        return ()
    reference = new_image.get("reference", "")
    message = f"{reference} runs as digest {new}"
    return (Event(_name(snap, "digest", new), "Normal", DIGEST_PINNED, message),)


def _plan(snap: Snapshot, decision: Decision, stored: Json, desired: Json) -> tuple[Event, ...]:
    """A plan that starts to wait for approval; an approved plan's apply that starts."""
    if isinstance(decision, Run) and decision.plan_job:
        message = f"applying the approved plan of Job {decision.plan_job}"
        name = _name(snap, "planapplying", decision.plan_job)
        return (Event(name, "Normal", APPROVED_PLAN_APPLYING, message),)
    old, new = _condition(stored, "Waiting"), _condition(desired, "Waiting")
    waits = new.get("reason") == Reason.WAITING_FOR_APPROVAL
    if not waits or old.get("reason") == Reason.WAITING_FOR_APPROVAL:
        return ()
    name = _name(snap, "planwaits", old.get("lastTransitionTime", ""), old.get("reason", ""))
    return (Event(name, "Normal", PLAN_AWAITS_APPROVAL, new.get("message", "")),)


def mark_event(snap: Snapshot, mark: OwnerMark | None) -> tuple[Event, ...]:
    """The Event of a remediation mark set or withdrawn on the owner Machine."""
    if mark is None:
        return ()
    kind = "Warning" if mark.reason == remediation.REQUESTED else "Normal"
    return (Event(remediation.event_name(snap.name, mark), kind, mark.reason, mark.message),)


def sized_event(snap: Snapshot, sized: PoolPatch | None) -> tuple[Event, ...]:
    """The Event of a write to the MachinePool: replicas written back, or CAPTF's old
    claim withdrawn; once per write (its name carries the resourceVersion the patch was
    guarded by)."""
    if sized is None:
        return ()
    version = str((sized.patch.get("metadata") or {}).get("resourceVersion") or "")
    if sized.replicas is None:
        name = f"{snap.name}.claim-withdrawn.{version}"[:253]
        return (Event(name, "Normal", replicas.WITHDRAWN, sized.message),)
    name = f"{snap.name}.replicas.{sized.replicas}.{version}"[:253]
    return (Event(name, "Normal", replicas.WRITTEN, sized.message),)
