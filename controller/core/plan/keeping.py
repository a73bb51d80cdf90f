"""What a deletion that keeps the state writes, and what an adoption writes: metadata
patches of the object's state, backups and durable inputs Secrets, and their Events.
Pure; io sends each patch as it is (controller/io/reconciler.py, step 6).

Retain labels each kept Secret with the object it came from and that object's uid, and
takes the object's owner reference off the inputs Secrets (the state and its backups
have none), so the garbage collector leaves them when the object goes. An adoption
removes the two labels again and gives the inputs Secrets the adopting object as owner.
Each patch names only what it sets: sent twice, it changes nothing the second time, and
a Secret that already shows it is not patched again."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics.names import (
    LABEL_RETAINED_FROM,
    LABEL_RETAINED_UID,
    LABEL_UID,
    Reason,
)
from controller.core.decide import deletion
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Idle
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import labels_of, name_of
from controller.core.plan.accounting import Event
from controller.core.plan.jobspec import owner_reference
from runtime.jsonobj import Json

ABANDONED_EVENT = "AbandonedInfrastructure"
RETAINED_EVENT = "InfrastructureRetained"
ADOPTED_EVENT = "RetainedStateAdopted"


@dataclass(frozen=True)
class SecretPatch:
    name: str
    patch: Json  # a JSON merge patch of the Secret


def _is_inputs(snap: Snapshot, secret: Json) -> bool:
    return any(name_of(s) == name_of(secret) for s in snap.inputs_secrets())


def retain_patches(snap: Snapshot) -> tuple[SecretPatch, ...]:
    """The labels (and, on inputs Secrets, the owner reference removed) that keep the
    state, its backups and the inputs past the object."""
    source = f"{snap.kind}.{snap.name}"
    marks = {LABEL_RETAINED_FROM: source, LABEL_RETAINED_UID: snap.uid}
    out = []
    for secret in deletion.own_secrets(snap):
        meta: Json = {}
        if any(labels_of(secret).get(k) != v for k, v in marks.items()):
            meta["labels"] = marks
        if _is_inputs(snap, secret) and secret.get("metadata", {}).get("ownerReferences"):
            meta["ownerReferences"] = None
        if meta:
            out.append(SecretPatch(name_of(secret), {"metadata": meta}))
    return tuple(out)


def adopt_patches(snap: Snapshot, adopting: bool) -> tuple[SecretPatch, ...]:
    """With spec.adoptRetainedState: the retained marks removed from another object's
    Secrets, and this object made the owner of its inputs Secrets."""
    other = deletion.retained_by_other(snap)
    if not adopting or other is None or snap.deleting:
        return ()
    out = []
    for secret in deletion.own_secrets(snap):
        if labels_of(secret).get(LABEL_RETAINED_UID) != other.uid:
            continue
        labels: Json = {LABEL_RETAINED_FROM: None, LABEL_RETAINED_UID: None}
        meta: Json = {"labels": labels}
        if _is_inputs(snap, secret):
            labels[LABEL_UID] = snap.uid
            meta["ownerReferences"] = [owner_reference(snap.obj, controller=False)]
        out.append(SecretPatch(name_of(secret), {"metadata": meta}))
    return tuple(out)


def patches_of(ctx: Context | None, decision: Decision) -> tuple[SecretPatch, ...]:
    if ctx is None:
        return ()
    if isinstance(decision, Idle) and decision.reason == Reason.RETAINED:
        return retain_patches(ctx.snap)
    return adopt_patches(ctx.snap, ctx.policy.adopt_retained_state)


def events_of(ctx: Context | None, decision: Decision) -> tuple[Event, ...]:
    """The Warning of an abandon, the Normal Events of a retain and an adoption; each
    named for the object's uid, so a replayed pass records it once."""
    if ctx is None:
        return ()
    snap = ctx.snap
    base = f"{snap.name[:200]}.{snap.uid[:8]}"
    if isinstance(decision, Idle) and decision.reason == Reason.ABANDONED:
        return (Event(f"{base}.abandoned", "Warning", ABANDONED_EVENT, decision.message),)
    if isinstance(decision, Idle) and decision.reason == Reason.RETAINED:
        return (Event(f"{base}.retained", "Normal", RETAINED_EVENT, decision.message),)
    other = deletion.retained_by_other(snap)
    if ctx.policy.adopt_retained_state and other is not None and not snap.deleting:
        message = f"adopted the state retained from {other.source} uid {other.uid}"
        return (Event(f"{base}.adopted", "Normal", ADOPTED_EVENT, message),)
    return ()
