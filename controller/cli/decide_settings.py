"""The controller flags `captf decide` decides under, so that it answers as the controller
whose objects it reads: each run-slot flag from the command line, else from the snapshot
file's `flags:` (the flags it was taken under), else `captf run`'s default.

The run slots are counted where that controller keeps them, its namespace
(`--controller-namespace`; `captf run` takes its pod's). Unnamed, it is the one namespace
the snapshot's run slots are in: only a controller takes slots, so where they are is
where it runs (`captf-system` for the install). With slots in several namespaces
(several controllers, each with its own), it is the one whose slots have held Jobs of
the object's namespace (a slot keeps its last holder's namespace when freed): the
controller that serves it. Failing that, the namespace must be named. With no slot at all
there is nothing to count, and the namespace makes no difference."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from controller.cli.snapshot_file import SnapshotError
from controller.core.decide.settings import DEFAULT_SLOT_NAMESPACE, Settings, settings_of
from controller.core.leases.slots import holder_cluster, slot_namespaces
from runtime.jsonobj import Json

# `captf run`'s defaults of the flags a file may set (snapshot_file.FILE_FLAGS), which
# `captf decide` leaves unset (None) so that a file's value is not taken for one given.
DEFAULTS: Mapping[str, float | None] = {
    "controller-namespace": None,
    "max-concurrent-runs": 10,
    "max-concurrent-runs-per-cluster": 0,
    "background-run-share": 0.5,
    "background-jobs-per-minute": 60,
}


def settings_for(
    args: argparse.Namespace, file_flags: Mapping[str, str | int | float], objects: list[Json]
) -> Settings:
    """The Settings of one decision: the flags as above, and the slots' namespace."""
    chosen = argparse.Namespace(**vars(args))
    for flag, default in DEFAULTS.items():
        attribute = flag.replace("-", "_")
        if getattr(args, attribute) is None:
            setattr(chosen, attribute, file_flags.get(flag, default))
    namespace = chosen.controller_namespace or slot_namespace_of(objects)
    return settings_of(chosen, slot_namespace=namespace)


def slot_namespace_of(objects: list[Json]) -> str:
    """The controller's namespace as the snapshot's run slots show it (above)."""
    leases = [o for o in objects if o.get("kind") == "Lease"]
    found = slot_namespaces(leases)
    if len(found) > 1:
        served = str(objects[0].get("metadata", {}).get("namespace", ""))
        found = slot_namespaces([s for s in leases if holder_cluster(s)[0] == served]) or found
    if len(found) > 1:
        raise SnapshotError(
            f"run slots are in several namespaces ({', '.join(found)}): name the "
            "controller's with --controller-namespace"
        )
    return found[0] if found else DEFAULT_SLOT_NAMESPACE
