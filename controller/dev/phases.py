"""The timeline's lines for Cluster API's own objects: a Cluster's, a Machine's and a
MachinePool's phase as Cluster API moves it (Pending, Provisioning, Provisioned,
Running, Deleting, ...), a MachinePool's replicas, and a Cluster's Available condition
once it is True (and each change after). Pure functions of (old, new), so
the lines are tested without a cluster; the Timeline watches and prints them."""

from __future__ import annotations

from controller.core.basics.names import CAPI_CLUSTER, CAPI_POOL
from runtime.jsonobj import Json


def _status(obj: Json | None) -> Json:
    found: Json = (obj or {}).get("status") or {}
    return found


def phase_of(obj: Json | None) -> str:
    return str(_status(obj).get("phase") or "")


def replicas_of(pool: Json | None) -> tuple[int, int, int] | None:
    """(wanted, have, ready) of a MachinePool: spec.replicas, status.replicas and
    status.readyReplicas; None before it has a spec."""
    if pool is None:
        return None
    wanted = (pool.get("spec") or {}).get("replicas")
    status = _status(pool)
    return (
        int(wanted or 0),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
    )


def phase_change(old: Json | None, new: Json | None) -> str | None:
    """`phase Provisioning -> Provisioned` when the phase moved; the first phase seen
    reads `phase Pending`. None when it did not move."""
    before, after = phase_of(old), phase_of(new)
    if new is None or not after or after == before:
        return None
    line = f"phase {before} -> {after}" if before else f"phase {after}"
    provider_id = (new.get("spec") or {}).get("providerID")
    if after in ("Provisioned", "Running") and provider_id:
        line += f" ({provider_id})"
    return line


def replicas_change(old: Json | None, new: Json | None) -> str | None:
    """A MachinePool's `replicas 1/2 (ready 0)` when any of the three counts moved."""
    if new is None or new.get("kind") != CAPI_POOL:
        return None
    before, after = replicas_of(old), replicas_of(new)
    if after is None or after == before:
        return None
    wanted, have, ready = after
    return f"replicas {have}/{wanted} (ready {ready})"


def _available(cluster: Json | None) -> Json:
    for condition in _status(cluster).get("conditions") or []:
        if condition.get("type") == "Available":
            found: Json = condition
            return found
    return {}


def available_change(old: Json | None, new: Json | None) -> str | None:
    """A Cluster's `Available True` when it becomes True, and `Available False (reason)`
    (or Unknown) when it stops being True; nothing else."""
    if new is None or new.get("kind") != CAPI_CLUSTER:
        return None
    before, after = _available(old).get("status"), _available(new)
    now = after.get("status")
    if now == "True" and before != "True":
        return "Available True"
    if before == "True" and now != "True":
        return f"Available {now or 'gone'} ({after.get('reason', '')})"
    return None


def lines_of(old: Json | None, new: Json | None) -> list[str]:
    """What the timeline prints for one change of a Cluster API object."""
    if new is None:
        return ["deleted"] if old is not None else []
    changes = (phase_change(old, new), replicas_change(old, new), available_change(old, new))
    return [line for line in changes if line]
