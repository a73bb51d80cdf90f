"""Carries out the state moves the core plans (controller/core/plan/state_moves.py).

Each move reads its Secrets live (the caches never hold a state's body): a COPY
creates the target with the source's data, labels and annotations and reads it back
to compare; a RETIRE compares the two again and deletes the source over the uid and
resourceVersion it read. A source gone meanwhile, or a target that holds other data,
moves nothing (the latter is logged: the older Secret stays for the operator)."""

from __future__ import annotations

import logging

from controller.core import Move, MoveStep
from controller.core.basics.names import (
    LABEL_BACKUP_OF,
    LABEL_CLUSTERCTL_MOVE,
    MANAGED_BY,
)
from controller.io import api
from controller.io.api import Api
from runtime.errors import ApiError
from runtime.jsonobj import Json

log = logging.getLogger(__name__)


async def carry_out(client: Api, namespace: str, moves: tuple[Move, ...]) -> bool:
    """The moves, in order; whether any Secret was written or deleted."""
    changed = False
    for move in moves:
        if move.step is MoveStep.COPY:
            changed = await _copy(client, namespace, move) or changed
        else:
            changed = await _retire(client, namespace, move) or changed
    return changed


async def _copy(client: Api, namespace: str, move: Move) -> bool:
    source = await api.get_or_none(client, api.secret_path(namespace, move.source))
    if source is None:
        return False
    meta = source.get("metadata") or {}
    labels = {**(meta.get("labels") or {}), **MANAGED_BY, LABEL_CLUSTERCTL_MOVE: ""}
    if move.backup_of is not None:
        labels[LABEL_BACKUP_OF] = move.backup_of
    body: Json = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": source.get("type", "Opaque"),
        "metadata": {
            "name": move.target,
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(meta.get("annotations") or {}),
        },
        "data": dict(source.get("data") or {}),
    }
    created = await api.create(client, api.secret_path(namespace), body)
    target = await api.get_or_none(client, api.secret_path(namespace, move.target))
    if target is None or target.get("data") != source.get("data"):
        log.warning(
            "%s/%s: not moved: %s holds other data than %s; both are kept",
            namespace,
            move.source,
            move.target,
            move.source,
        )
        return created is not None
    log.info("%s/%s: copied to %s", namespace, move.source, move.target)
    return True


async def _retire(client: Api, namespace: str, move: Move) -> bool:
    source = await api.get_or_none(client, api.secret_path(namespace, move.source))
    target = await api.get_or_none(client, api.secret_path(namespace, move.target))
    if source is None or target is None:
        return False
    if target.get("data") != source.get("data"):
        log.warning(
            "%s/%s: not retired: %s holds other data; both are kept",
            namespace,
            move.source,
            move.target,
        )
        return False
    meta = source["metadata"]
    preconditions = {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
    try:
        await client.request("DELETE", api.secret_path(namespace, move.source), body=body)
    except ApiError as err:
        if err.status not in (404, 409):
            raise
        return False  # gone, or changed since read: the next pass sees which
    log.info("%s/%s: moved to %s", namespace, move.source, move.target)
    return True
