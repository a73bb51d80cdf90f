"""Run slots: `--max-concurrent-runs` Leases in the controller's namespace, named
`captf-run-slot-<i>`, each held in the name of one running Job; and the per-cluster cap,
`--max-concurrent-runs-per-cluster`: the Jobs of one Cluster API cluster (its cluster,
machines and pools) hold at most that many slots at once, so one MachineDeployment
scaling by hundreds leaves the other clusters slots to apply with.

The one rule of what a run slot is and which one a Job takes: the gate that waits for a
free slot and the launch's claim of one (decide/claims.py, read once per decision) read it
from here, so they cannot disagree about whether a slot is free. A slot names its
holder's namespace and cluster (writes.py writes them); a slot taken before the cluster
was written counts for no cluster."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from controller.core.basics.names import (
    ANN_HOLDER_CLUSTER,
    ANN_HOLDER_NAMESPACE,
    LABEL_SCOPE,
    RUN_SLOT_PREFIX,
    SCOPE_RUN_SLOT,
)
from controller.core.jobs.job import annotations_of, labels_of, name_of
from controller.core.leases.family import holder_of
from runtime.jsonobj import Json


def is_run_slot(lease: Json) -> bool:
    """By its scope label, or by its name for a slot written before the label."""
    return labels_of(lease).get(LABEL_SCOPE) == SCOPE_RUN_SLOT or name_of(lease).startswith(
        RUN_SLOT_PREFIX
    )


def slot_name(index: int) -> str:
    return f"{RUN_SLOT_PREFIX}{index}"


def free_slot(
    leases: Iterable[Json], *, job: str, own_jobs: Collection[str], namespace: str, count: int
) -> str | None:
    """The slot already held for `job`, else the first of the `count` slots that is free
    or held by one of the object's own Jobs (finished, awaiting release); None when all
    are held. Only the slots of `namespace`, the controller's, count."""
    found = free_slots(leases, job=job, own_jobs=own_jobs, namespace=namespace, count=count)
    return found[0] if found else None


def free_slots(
    leases: Iterable[Json], *, job: str, own_jobs: Collection[str], namespace: str, count: int
) -> list[str]:
    """The slot already held for `job` alone, else every slot `free_slot` could take, in
    its order: the launch takes the first, and the next when another Job took that one
    meanwhile (objects launching together all see the same first free slot)."""
    slots = _slots(leases, namespace)
    for name, lease in sorted(slots.items()):
        if holder_of(lease) == job:
            return [name]
    found = []
    for i in range(count):
        holder = holder_of(slots.get(slot_name(i)))
        if not holder or holder in own_jobs:
            found.append(slot_name(i))
    return found


def cluster_full(
    leases: Iterable[Json],
    *,
    job: str,
    own_jobs: Collection[str],
    namespace: str,
    cluster: tuple[str, str],
    cap: int,
) -> str | None:
    """Why `job` of `cluster` (namespace, name) waits though a slot may be free: the
    cluster's other Jobs hold `cap` slots already. None when it may take one: no cap (0),
    no cluster, a slot held for `job` already, or fewer held."""
    if cap <= 0 or not cluster[1]:
        return None
    held = 0
    for lease in _slots(leases, namespace).values():
        holder = holder_of(lease)
        if not holder:
            continue  # a free slot: its empty holder is no Job's, not `job`'s either
        if holder == job:
            return None
        if holder not in own_jobs and holder_cluster(lease) == cluster:
            held += 1
    if held < cap:
        return None
    return (
        f"cluster {cluster[1]} holds {held} run slots, its cap (--max-concurrent-runs-per-cluster)"
    )


def holder_cluster(lease: Json) -> tuple[str, str]:
    """The namespace and cluster of the Job holding a slot, as the slot says."""
    notes = annotations_of(lease)
    return notes.get(ANN_HOLDER_NAMESPACE, ""), notes.get(ANN_HOLDER_CLUSTER, "")


def slot_namespaces(leases: Iterable[Json]) -> list[str]:
    """The namespaces that hold run slots, sorted: one, the controller's, in a cluster a
    single controller (or shards sharing its namespace) serves."""
    found = {lease["metadata"].get("namespace") for lease in leases if is_run_slot(lease)}
    return sorted(str(namespace) for namespace in found if namespace)


def _slots(leases: Iterable[Json], namespace: str) -> dict[str, Json]:
    """The run slots of `namespace`, the controller's, by name."""
    return {
        name_of(lease): lease
        for lease in leases
        if lease["metadata"].get("namespace") == namespace and is_run_slot(lease)
    }
