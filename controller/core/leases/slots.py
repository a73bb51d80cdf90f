"""Run slots: `--max-concurrent-runs` Leases in the controller's namespace, named
`captf-run-slot-<i>`, each held in the name of one running Job.

The one rule of what a run slot is and which one a Job takes: the gate that waits for a
free slot (decide/gates.py) and the launch that claims one (plan/launching.py) read it
from here, so they cannot disagree about whether a slot is free."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from controller.core.basics.names import LABEL_SCOPE, RUN_SLOT_PREFIX, SCOPE_RUN_SLOT
from controller.core.jobs.job import labels_of, name_of
from controller.core.leases.family import holder_of

Json = dict[str, Any]


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
    slots = {
        name_of(lease): lease
        for lease in leases
        if lease["metadata"].get("namespace") == namespace and is_run_slot(lease)
    }
    for name, lease in sorted(slots.items()):
        if holder_of(lease) == job:
            return name
    for i in range(count):
        holder = holder_of(slots.get(slot_name(i)))
        if not holder or holder in own_jobs:
            return slot_name(i)
    return None
