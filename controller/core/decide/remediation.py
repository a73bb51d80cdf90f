"""Remediation through Cluster API: a TerraformMachine whose instance reads unhealthy
asks its Machine to be remediated, and withdraws the ask when it reads healthy again.

Cluster API's MachineHealthCheck treats a Machine annotated
`cluster.x-k8s.io/remediate-machine` as unhealthy (`HasRemediateMachineAnnotation`) and
remediates it as it would any other: the MachineSet (or control plane) deletes it and
makes a new one, whose TerraformMachine is a new machine; the old one's destroy Job
runs as for any deleted machine. CAPTF never deletes a Machine itself.

The ask is made after REMEDIATE_AFTER readings in a row read the instance degraded,
stopped or terminated (one reading could be a blip, and the health watch reads every
5 min by default); it is withdrawn once the newest reading is running again. Only
readings that tell the health count (`triggers.health_told`): a refresh that failed, a
result without a contract reading, a null or `unknown` health are passed over, neither
unhealthy nor an end of the row; a pending reading (the instance coming up) ends it.

Only an ask CAPTF made is withdrawn: beside the annotation it writes
`captf.io/remediation-requested` (the TerraformMachine's uid), and a mark someone else
set is left alone. Nothing is written while the object is paused or being deleted, or
for a module outside the contract (it has no health reading). Pure: the plan carries
the patch to io."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from controller.core.basics.names import CAPI_MACHINE, MACHINE
from controller.core.decide import pause, triggers
from controller.core.decide.context import Context, speaks_contract
from controller.core.spec.refs import owner_of
from runtime.jsonobj import Json

ANN_REMEDIATE: Final = "cluster.x-k8s.io/remediate-machine"
ANN_REQUESTED_BY: Final = "captf.io/remediation-requested"
REMEDIATE_AFTER: Final = 3
REQUESTED: Final = "RemediationRequested"
WITHDRAWN: Final = "RemediationWithdrawn"


@dataclass(frozen=True)
class OwnerMark:
    """A merge patch of the owner Machine's annotations, and why."""

    machine: str  # the Machine's name, in the object's namespace
    patch: Json  # {"metadata": {"annotations": {...}}}
    reason: str  # REQUESTED or WITHDRAWN
    message: str
    reading: str  # the Job whose reading decided it (names the Event once-only)


def owner_mark(ctx: Context) -> OwnerMark | None:
    snap = ctx.snap
    if snap.kind != MACHINE or snap.deleting or pause.pause_of(snap) is not None:
        return None
    if not speaks_contract(ctx.inputs):
        return None
    owner = owner_of(snap.obj)
    if owner is None:
        return None
    machine = snap.related.get((CAPI_MACHINE, owner.name))
    if machine is None:
        return None
    notes = (machine.get("metadata") or {}).get("annotations") or {}
    newest = _newest_reading(ctx)
    if newest is None:
        return None
    streak = triggers.unhealthy_streak(ctx)
    if streak >= REMEDIATE_AFTER and ANN_REMEDIATE not in notes:
        message = (
            f"{streak} readings in a row found the instance {newest[1]}: "
            f"Machine {owner.name} is marked {ANN_REMEDIATE} for its MachineHealthCheck"
        )
        patch: Json = {ANN_REMEDIATE: "", ANN_REQUESTED_BY: snap.uid}
        return _mark(owner.name, patch, REQUESTED, message, newest[0])
    if notes.get(ANN_REQUESTED_BY) == snap.uid and newest[1] == "running":
        message = f"the instance reads running again: {ANN_REMEDIATE} withdrawn from {owner.name}"
        patch = {ANN_REMEDIATE: None, ANN_REQUESTED_BY: None}  # a merge patch removes them
        return _mark(owner.name, patch, WITHDRAWN, message, newest[0])
    return None


def readings_kept(ctx: Context) -> frozenset[str]:
    """The Jobs whose readings the mark is decided on, kept beyond the history limits
    while they count: the newest reading that told the health and the rest of its
    unhealthy row, at most REMEDIATE_AFTER. The row is counted from the Jobs (they are
    the record of the readings), and the default successfulJobsHistoryLimit of 1 would
    prune all but the newest refresh: the count could then never reach the mark. A
    move, which carries no Jobs, starts the count again."""
    if ctx.snap.kind != MACHINE:
        return frozenset()
    names: list[str] = []
    for record, health in triggers.health_told(ctx):
        if names and health not in triggers.UNHEALTHY:
            break
        names.append(record.name)
        if health not in triggers.UNHEALTHY or len(names) >= REMEDIATE_AFTER:
            break
    return frozenset(names)


def _newest_reading(ctx: Context) -> tuple[str, str] | None:
    """The newest reading that tells the instance's health: (its Job's name, the state)."""
    for record, health in triggers.health_told(ctx):
        return record.name, health
    return None


def _mark(machine: str, notes: Json, reason: str, message: str, job: str) -> OwnerMark:
    return OwnerMark(machine, {"metadata": {"annotations": notes}}, reason, message, job)


def event_name(obj_name: str, mark: OwnerMark) -> str:
    """Once per reading that decided it: a replay of the pass is refused."""
    tag = hashlib.sha256(f"{mark.reason}/{mark.reading}".encode()).hexdigest()[:10]
    return f"{obj_name}.{mark.reason.lower()}.{tag}"
