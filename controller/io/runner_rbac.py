"""Carrying out the runner's RBAC (controller/core/decide/runner_rbac.py): the
ServiceAccount and RoleBinding a launch needs, created before its Job; both removed
once their namespace holds no CAPTF object and runs no CAPTF Job.

Creating: a create answered AlreadyExists means the cache did not show the object as
the controller's (it lags the controller's own create, or the object was applied by
hand, as before the controller provided it): it is taken over. A ServiceAccount gets
its labels (a merge patch; deleting it would invalidate the tokens of pods running as
it); a RoleBinding that is not the controller's is replaced, since its roleRef is
immutable and the hand-applied one bound the old per-namespace Role.

Removing: the caches' view first (free); then, only when they show the namespace
empty, live lists (one request per CAPTF kind, `limit=1`, and one of the namespace's
CAPTF Jobs): a shard's caches do not show the other shards' objects, and any cache
may lag an object created a moment ago. A new object that still races the removal
finds its account gone, and the next pass creates it again."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from controller.core import is_finished, runner_rbac
from controller.core.basics.names import KINDS, LABEL_UID, RUNNER_ACCOUNT
from controller.io import api
from controller.io.api import JOBS, OBJECTS, ROLE_BINDINGS, SERVICE_ACCOUNTS, Api
from controller.io.caches import Caches
from runtime.cache.resource import Resource
from runtime.errors import ApiError
from runtime.jsonobj import Json

log = logging.getLogger(__name__)
RESOURCES = {"ServiceAccount": SERVICE_ACCOUNTS, "RoleBinding": ROLE_BINDINGS}


async def provide(client: Api, creates: Sequence[Json]) -> None:
    """Creates (or takes over) each of the plan's runner RBAC objects."""
    for body in creates:
        meta = body["metadata"]
        resource = RESOURCES[body["kind"]]
        created = await api.create(client, api.resource_path(resource, meta["namespace"]), body)
        if created is None:
            await _take_over(client, resource, body)
        else:
            log.info(
                "%s/%s %s created for the runner", meta["namespace"], meta["name"], body["kind"]
            )


async def _take_over(client: Api, resource: Resource, body: Json) -> None:
    meta = body["metadata"]
    path = api.resource_path(resource, meta["namespace"], meta["name"])
    if body["kind"] == "ServiceAccount":
        await api.merge_patch(client, path, {"metadata": {"labels": meta["labels"]}})
        return
    found = await api.get_or_none(client, path)
    labels = (found or {}).get("metadata", {}).get("labels")
    if found is not None and runner_rbac.is_managed(labels) and _binds_as(found, body):
        return  # the controller's own, not yet in the cache
    await _delete(client, path)
    await api.create(client, api.resource_path(resource, meta["namespace"]), body)
    log.info("%s/%s RoleBinding replaced for the runner", meta["namespace"], meta["name"])


def _binds_as(found: Json, wanted: Json) -> bool:
    return all(found.get(k) == wanted[k] for k in ("roleRef", "subjects"))


async def remove_if_unused(client: Api, caches: Caches, namespace: str) -> None:
    """Deletes the namespace's provided runner RBAC once nothing of CAPTF is left there."""
    facts = caches.runner_facts(namespace)
    if not runner_rbac.removals(0, 0, facts):
        return  # nothing provided here
    cached_jobs = [j for j in caches.jobs.store if j["metadata"].get("namespace") == namespace]
    running = sum(1 for j in cached_jobs if not is_finished(j))
    if not runner_rbac.removals(caches.objects_in(namespace), running, facts):
        return
    objects = 0
    for kind in KINDS:
        listed = await client.request(
            "GET", api.resource_path(OBJECTS[kind], namespace), params={"limit": "1"}
        )
        objects += len(listed.get("items") or [])
    jobs = await client.request(
        "GET", api.resource_path(JOBS, namespace), params={"labelSelector": LABEL_UID}
    )
    running = sum(1 for j in jobs.get("items") or [] if not is_finished(j))
    for kind in runner_rbac.removals(objects, running, facts):
        await _delete(client, api.resource_path(RESOURCES[kind], namespace, RUNNER_ACCOUNT))
        log.info("%s/%s %s removed: no CAPTF object is left", namespace, RUNNER_ACCOUNT, kind)


async def _delete(client: Api, path: str) -> None:
    try:
        await client.request("DELETE", path)
    except ApiError as err:
        if err.status != 404:
            raise
