"""Whom an object acts for, and the waits until it may act for them (Cluster API).

A TerraformCluster acts for the Cluster that owns it; a TerraformMachine or
TerraformMachinePool for its owner Machine or MachinePool, and for the Cluster its
cluster-name label names. The snapshot's `related` holds those owners under
ObjectRef("Cluster", name), ObjectRef("Machine", name), ObjectRef("MachinePool", name);
the references themselves are read in controller/core/spec/refs.py.

The steps here are DecideOp's owner waits, in the order a newcomer reads them: the
owner exists and names this object back; a member's Cluster exists and its
infrastructure is a TerraformCluster, already provisioned; the owner's bootstrap data
is there. A deletion never waits for any of them (the steps come after `deleting`):
infrastructure whose owner went first must still be destroyable."""

from __future__ import annotations

from typing import Final

from controller.core.basics.names import (
    CAPI_CLUSTER,
    CLUSTER,
    LABEL_CLUSTER_NAME,
    OWNER_KINDS,
    Reason,
)
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Requeue
from controller.core.decide.snapshot import Snapshot
from controller.core.spec.refs import (
    ObjectRef,
    bootstrap_secret_of,
    capi_cluster_ref,
    infrastructure_ref,
    names_captf,
    owner_of,
    terraform_cluster_of,
)
from runtime.jsonobj import Json

# Every owner wait is also woken by a watch (the owner, the Cluster, the bootstrap Secret);
# the requeue is only the fallback, long enough never to spin.
OWNER_WAIT: Final = 60.0
# A bootstrap Secret without `value` is a mistake someone must fix: the Secret's change
# wakes the object.
BOOTSTRAP_INVALID_WAIT: Final = 600.0
BOOTSTRAP_KEY: Final = "value"


def owner(snap: Snapshot) -> Json | None:
    """The owner Cluster, Machine or MachinePool, when the snapshot has it."""
    ref = owner_of(snap.obj)
    return snap.related.get(ref) if ref is not None else None


def capi_cluster(snap: Snapshot) -> Json | None:
    """The Cluster API Cluster the object belongs to, when the snapshot has it."""
    ref = capi_cluster_ref(snap.obj)
    return snap.related.get(ref) if ref is not None else None


def _wait(reason: str, message: str, after: float = OWNER_WAIT) -> Requeue:
    return Requeue(reason, after, message=message)


def owner_waits(ctx: Context) -> Decision | None:
    """WaitingForOwner until the owner exists; OwnerRefMismatch while its infrastructureRef
    names another object (the owner acts through that one, not this one)."""
    snap = ctx.snap
    want = OWNER_KINDS.get(snap.kind, "")
    ref = owner_of(snap.obj)
    if ref is None:
        return _wait(Reason.WAITING_FOR_OWNER, f"no owner {want} yet")
    found = snap.related.get(ref)
    if found is None:
        return _wait(Reason.WAITING_FOR_OWNER, f"owner {want} {ref.name} not found")
    back = infrastructure_ref(found)
    if not names_captf(back, snap.kind, snap.name):
        named = f"{back.get('kind') or '(none)'}/{back.get('name') or '(none)'}"
        message = f"{want} {ref.name} references {named} as its infrastructure, not this object"
        return _wait(Reason.OWNER_REF_MISMATCH, message)
    return None


def member_cluster(ctx: Context) -> Decision | None:
    """A machine or pool: its Cluster exists and its infrastructure is a TerraformCluster
    (the family a member runs in is that TerraformCluster's)."""
    snap = ctx.snap
    if snap.kind == CLUSTER:
        return None
    ref = capi_cluster_ref(snap.obj)
    if ref is None:
        return _wait(Reason.WAITING_FOR_OWNER, f"no {LABEL_CLUSTER_NAME} label yet")
    cluster = snap.related.get(ref)
    if cluster is None:
        return _wait(Reason.WAITING_FOR_OWNER, f"{CAPI_CLUSTER} {ref.name} not found")
    if not terraform_cluster_of(cluster):
        infra = infrastructure_ref(cluster)
        named = f"{infra.get('kind')}/{infra.get('name')}" if infra else "no infrastructure"
        message = f"{CAPI_CLUSTER} {ref.name} references {named}, not a {CLUSTER}"
        return _wait(Reason.CLUSTER_NOT_TERRAFORM, message)
    return None


def cluster_infrastructure(ctx: Context) -> Decision | None:
    """A machine or pool starts once its Cluster says the infrastructure is provisioned
    (status.initialization.infrastructureProvisioned, as Cluster API's contract asks)."""
    snap = ctx.snap
    cluster = capi_cluster(snap)
    if snap.kind == CLUSTER or cluster is None:
        return None
    initialization = (cluster.get("status") or {}).get("initialization") or {}
    if initialization.get("infrastructureProvisioned") is True:
        return None
    name = cluster["metadata"]["name"]
    message = f"{CAPI_CLUSTER} {name}: infrastructure not provisioned yet"
    return _wait(Reason.WAITING_FOR_CLUSTER_INFRASTRUCTURE, message)


def bootstrap_data(ctx: Context) -> Decision | None:
    """A machine or pool starts once its owner's bootstrap data Secret exists with `value`."""
    snap = ctx.snap
    found = owner(snap)
    if snap.kind == CLUSTER or found is None:
        return None
    name = bootstrap_secret_of(found)
    kind, owner_name = found.get("kind"), found["metadata"]["name"]
    if not name:
        message = f"{kind} {owner_name} has no bootstrap dataSecretName yet"
        return _wait(Reason.WAITING_FOR_BOOTSTRAP_DATA, message)
    secret = snap.secrets.get(name)
    if secret is None:
        return _wait(Reason.WAITING_FOR_BOOTSTRAP_DATA, f"bootstrap data Secret {name} not found")
    if BOOTSTRAP_KEY not in (secret.get("data") or {}):
        message = f"bootstrap data Secret {name} has no key {BOOTSTRAP_KEY!r}"
        return _wait(Reason.BOOTSTRAP_DATA_INVALID, message, BOOTSTRAP_INVALID_WAIT)
    return None


def members(snap: Snapshot) -> list[ObjectRef]:
    """A TerraformCluster's machines and pools in the snapshot: those labelled with its
    Cluster's name."""
    cluster = capi_cluster_ref(snap.obj)
    if snap.kind != CLUSTER or cluster is None:
        return []
    return sorted(
        ObjectRef(kind, name)
        for (kind, name), other in snap.related.items()
        if kind in OWNER_KINDS and kind != CLUSTER and capi_cluster_ref(other) == cluster
    )
