"""Remediation through Cluster API: a TerraformMachine whose instance reads unhealthy
asks its Machine to be remediated, and withdraws the ask when it reads healthy again.

Cluster API's MachineHealthCheck treats a Machine annotated
`cluster.x-k8s.io/remediate-machine` as unhealthy (`HasRemediateMachineAnnotation`) and
remediates it as it would any other: the MachineSet (or control plane) deletes it and
makes a new one, whose TerraformMachine is a new machine; the old one's destroy Job
runs as for any deleted machine. CAPTF never deletes a Machine itself.

The ask is made (`unhealthy_row`):
- at once when the newest reading says `terminated`, or when the two newest readings
  have no provider ID although spec.providerID was written (the module no longer finds
  the instance; one such reading could be a blip in the module's read);
- after `threshold` readings in a row read the instance degraded, stopped, terminated,
  or running with `healthy = false`: spec.health.unhealthyThreshold, else the
  TerraformCluster's, else DEFAULT_THRESHOLD (one reading could be a blip, and the
  health watch reads every 5 min by default).
It is withdrawn once the newest reading is running (and healthy) again. Only readings
that tell the health count (`triggers.health_told`): a refresh that failed, a result
without a contract reading, a null or `unknown` health are passed over, neither
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

from controller.core.basics.names import CAPI_MACHINE, CLUSTER, MACHINE
from controller.core.decide import pause, triggers
from controller.core.decide.context import Context, speaks_contract
from controller.core.jobs.history import Finished
from controller.core.spec.policy import PolicyError, read_unhealthy_threshold
from controller.core.spec.refs import cluster_of, owner_of, spec_of
from runtime.jsonobj import Json

ANN_REMEDIATE: Final = "cluster.x-k8s.io/remediate-machine"
ANN_REQUESTED_BY: Final = "captf.io/remediation-requested"
DEFAULT_THRESHOLD: Final = 3
# Readings in a row without the provider ID that mark at once.
GONE_READINGS: Final = 2
REQUESTED: Final = "RemediationRequested"
WITHDRAWN: Final = "RemediationWithdrawn"
# How a message names what a reading found, where it is not the module's state.
_WORDS: Final = {
    triggers.RUNNING_UNHEALTHY: "running but not healthy",
    triggers.GONE: "without its provider ID",
}


@dataclass(frozen=True)
class OwnerMark:
    """A merge patch of the owner Machine's annotations, and why."""

    machine: str  # the Machine's name, in the object's namespace
    patch: Json  # {"metadata": {"annotations": {...}}}
    reason: str  # REQUESTED or WITHDRAWN
    message: str
    reading: str  # the Job whose reading decided it (names the Event once-only)


@dataclass(frozen=True)
class Row:
    """The newest readings toward the mark, newest first: the newest telling reading,
    the readings without a provider ID at the head of the row (at most GONE_READINGS),
    and the unhealthy ones in a row (at most the threshold)."""

    readings: tuple[tuple[Finished, str], ...]
    count: int  # the unhealthy readings in a row, toward the threshold
    threshold: int
    due: str | None  # why the mark is due (the start of its message); None: not yet


def describe(told: str) -> str:
    return _WORDS.get(told, told)


def threshold(ctx: Context) -> int:
    """spec.health.unhealthyThreshold; a machine without one takes its TerraformCluster's
    (one that is not there, or whose value cannot be read, gives the default), as it
    takes the cluster's deletionPolicy and pod policy."""
    if ctx.policy.unhealthy_threshold is not None:
        return ctx.policy.unhealthy_threshold
    cluster = ctx.snap.related.get((CLUSTER, cluster_of(ctx.snap.obj, ctx.snap.related)))
    try:
        inherited = read_unhealthy_threshold(spec_of(cluster)) if cluster else None
    except PolicyError:
        inherited = None
    return inherited or DEFAULT_THRESHOLD


def unhealthy_row(ctx: Context) -> Row:
    """The row the mark is decided on (see the module's docstring)."""
    limit = threshold(ctx)
    readings: list[tuple[Finished, str]] = []
    count = gone = 0
    for record, told in triggers.health_told(ctx):
        if told == triggers.GONE:
            if gone == len(readings):  # still at the head of the row
                readings.append((record, told))
                gone += 1
        elif told in triggers.UNHEALTHY:
            readings.append((record, told))
            count += 1
        else:
            if not readings:
                readings.append((record, told))
            break
        if count >= limit or gone >= GONE_READINGS:
            break
    return Row(tuple(readings), count, limit, _due(readings, count, gone, limit))


def _due(readings: list[tuple[Finished, str]], count: int, gone: int, limit: int) -> str | None:
    if readings and readings[0][1] == "terminated":
        return "a reading found the instance terminated"
    if gone >= GONE_READINGS:
        return f"{gone} readings in a row found the instance {describe(triggers.GONE)}"
    if count >= limit:
        newest = next(told for _, told in readings if told in triggers.UNHEALTHY)
        return f"{count} readings in a row found the instance {describe(newest)}"
    return None


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
    row = unhealthy_row(ctx)
    if not row.readings:
        return None
    newest, told = row.readings[0]
    if row.due is not None and ANN_REMEDIATE not in notes:
        message = (
            f"{row.due}: Machine {owner.name} is marked {ANN_REMEDIATE} for its MachineHealthCheck"
        )
        patch: Json = {ANN_REMEDIATE: "", ANN_REQUESTED_BY: snap.uid}
        return _mark(owner.name, patch, REQUESTED, message, newest.name)
    if notes.get(ANN_REQUESTED_BY) == snap.uid and told == "running":
        message = f"the instance reads running again: {ANN_REMEDIATE} withdrawn from {owner.name}"
        patch = {ANN_REMEDIATE: None, ANN_REQUESTED_BY: None}  # a merge patch removes them
        return _mark(owner.name, patch, WITHDRAWN, message, newest.name)
    return None


def readings_kept(ctx: Context) -> frozenset[str]:
    """The Jobs whose readings the mark is decided on, kept beyond the history limits
    while they count: the row (`unhealthy_row`), at most the threshold plus
    GONE_READINGS. The row is counted from the Jobs (they are the record of the
    readings), and the default successfulJobsHistoryLimit of 1 would prune all but the
    newest refresh: the count could then never reach the mark. A move, which carries no
    Jobs, starts the count again."""
    if ctx.snap.kind != MACHINE:
        return frozenset()
    return frozenset(record.name for record, _ in unhealthy_row(ctx).readings)


def _mark(machine: str, notes: Json, reason: str, message: str, job: str) -> OwnerMark:
    return OwnerMark(machine, {"metadata": {"annotations": notes}}, reason, message, job)


def event_name(obj_name: str, mark: OwnerMark) -> str:
    """Once per reading that decided it: a replay of the pass is refused."""
    tag = hashlib.sha256(f"{mark.reason}/{mark.reading}".encode()).hexdigest()[:10]
    return f"{obj_name}.{mark.reason.lower()}.{tag}"
