"""What the fleet's schedules ask of each set of credentials, and the stretch that keeps
it within the budget (controller/core/leases/budget.py): computed by the controller from
every object it caches, written on each budget Lease (budget_lease.py), read back by
each object's schedules.

An object's schedules are its background reads: a machine's health re-read
(spec.health.interval), a pool's membership re-read (spec.membership.interval), and
every object's drift check and scheduled refresh (spec.drift, spec.refresh), each as
the object's spec says, with the defaults applied. A spec that cannot be read asks for
nothing (its object runs nothing until it is fixed). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.core.basics.names import CLUSTER, IDENTITY, LABEL_CLUSTER_NAME, MACHINE, POOL
from controller.core.leases.budget import check_per_minute, demand_per_minute, stretch_of
from controller.core.leases.budget_lease import budget_key
from controller.core.spec.identity import IdentityRef, own_identity_ref
from controller.core.spec.policy import PolicyError, read_policy
from runtime.jsonobj import Json

PER_MINUTE_FIELD = "backgroundJobsPerMinute"


def intervals_of(obj: Json) -> list[float]:
    """The intervals of an object's background schedules, seconds."""
    try:
        policy = read_policy(obj.get("spec") or {})
    except PolicyError:
        return []
    kind = obj.get("kind")
    found = [policy.drift_interval, policy.refresh_interval]
    if kind == MACHINE:
        found.append(policy.health_interval)
    if kind == POOL:
        found.append(policy.membership_interval)
    return [interval for interval in found if interval]


def key_of(obj: Json, clusters: Mapping[tuple[str, str], Json]) -> str:
    """The budget key of an object: its credentials, or for a member without its own its
    cluster's (`clusters`: TerraformClusters by namespace and the Cluster API cluster
    they serve, which a member names in its cluster-name label)."""
    meta = obj["metadata"]
    namespace = str(meta.get("namespace") or "")
    own = own_identity_ref(obj.get("spec") or {})
    if own is not None or obj.get("kind") == CLUSTER:
        return budget_key(own, namespace)
    capi = str((meta.get("labels") or {}).get(LABEL_CLUSTER_NAME) or "")
    cluster = clusters.get((namespace, capi))
    ref = own_identity_ref(cluster.get("spec") or {}) if cluster is not None else None
    return budget_key(ref, namespace)


def _served(cluster: Json) -> str:
    """The Cluster API cluster a TerraformCluster serves: its owner Cluster, else its name."""
    meta = cluster["metadata"]
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Cluster":
            return str(ref.get("name") or "")
    return str(meta.get("name") or "")


def demand_by_key(objects: Iterable[Json]) -> dict[str, float]:
    """Background Jobs a minute the schedules of `objects` (every TerraformCluster,
    TerraformMachine and TerraformMachinePool) ask of each budget key."""
    listed = list(objects)
    clusters = {
        (str(o["metadata"].get("namespace") or ""), _served(o)): o
        for o in listed
        if o.get("kind") == CLUSTER
    }
    demand: dict[str, float] = {}
    for obj in listed:
        if obj["metadata"].get("deletionTimestamp"):
            continue
        key = key_of(obj, clusters)
        demand[key] = demand.get(key, 0.0) + demand_per_minute(intervals_of(obj))
    return demand


def per_minute_of(key: str, identities: Mapping[str, Json], default: int) -> int:
    """The budget of a key: its identity's spec.backgroundJobsPerMinute when set (and
    valid), else the controller's default."""
    kind, _, name = key.partition(" ")
    if kind != "identity" or name not in identities:
        return default
    value = (identities[name].get("spec") or {}).get(PER_MINUTE_FIELD)
    if value is None:
        return default
    try:
        return check_per_minute(value, f"spec.{PER_MINUTE_FIELD}")
    except ValueError:
        return default


def stretches(
    objects: Iterable[Json], identities: Mapping[str, Json], default: int
) -> dict[str, tuple[float, float, int]]:
    """Each key's (stretch, demand a minute, budget a minute)."""
    found = {}
    for key, demand in sorted(demand_by_key(objects).items()):
        budget = per_minute_of(key, identities, default)
        found[key] = (stretch_of(demand, budget), round(demand, 3), budget)
    return found


def identity_key(name: str) -> str:
    return budget_key(IdentityRef(IDENTITY, name), "")
