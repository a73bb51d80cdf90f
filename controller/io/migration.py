"""The storage version migration: objects that the API server may still keep in an older
version (v1alpha1) rewritten in the storage version, then the CRDs' status.storedVersions
trimmed to it (controller/core/conversion/storage.py says why and when).

The leader of a controller that watches every namespace runs it once it has synced, in
the background, for every CRD of CAPTF's group (api.STORED): read the CRD; if it lists a
version besides the storage one, rewrite every object of it with an empty merge patch
(through the status subresource where there is one, so spec, generation and the
admission webhooks are untouched), then patch the CRD's status. An object that is gone
meanwhile needs nothing; a transient failure leaves the CRD for the next round, RETRY
later, and the rewrites already made stay made; a refusal (RBAC) is said once. A
controller restricted to some namespaces runs none of it: it could not see every object
to trim after, and its install grants no CRD (the next `clusterctl upgrade` migrates the
CRDs it finds listing two versions, or an operator does: docs/upgrading.md)."""

from __future__ import annotations

import logging
from typing import Any, Final

from controller.core import rewrites_through_status, stale_versions, trimmed
from controller.core.basics.names import GROUP
from controller.io.api import CRDS, MERGE, STORED, Api, resource_path
from runtime.cache.resource import Resource
from runtime.clock import Clock
from runtime.errors import ApiError, is_transient

log = logging.getLogger("captf.migration")
# Seconds between rounds while a CRD is left to do.
RETRY: Final = 30.0
# Objects per list page.
PAGE: Final = 500


class Forbidden(Exception):
    """The controller may not read or write what the migration needs."""


async def migrate_storage(api: Api, clock: Clock) -> None:
    """Rounds until every CRD of CAPTF's group stores one version (or may not be read)."""
    pending = list(STORED)
    while pending:
        for resource in list(pending):
            try:
                await _migrate(api, resource)
            except Forbidden as refused:
                log.warning("storage migration of %s not done: %s", resource.plural, refused)
            except (ApiError, TimeoutError, ConnectionError) as error:
                if is_transient(error):
                    continue  # the next round
                log.warning("storage migration of %s failed: %s", resource.plural, error)
            pending.remove(resource)
        if pending:
            await clock.sleep(RETRY)


async def _migrate(api: Api, resource: Resource) -> None:
    crd = await _call(api, "GET", resource_path(CRDS, None, f"{resource.plural}.{GROUP}"))
    stale = stale_versions(crd)
    if not stale:
        return
    sub = "status" if rewrites_through_status(crd) else ""
    rewritten = await _rewrite_all(api, resource, sub)
    path = resource_path(CRDS, None, f"{resource.plural}.{GROUP}", sub="status")
    await _call(api, "PATCH", path, body=trimmed(crd), content_type=MERGE)
    log.info(
        "storage migration: %d %s rewritten; %s no longer stored",
        rewritten,
        resource.plural,
        ",".join(stale),
    )


async def _rewrite_all(api: Api, resource: Resource, sub: str) -> int:
    """Every object of the kind patched with nothing; how many."""
    count, token = 0, ""
    while True:
        params = {"limit": str(PAGE), **({"continue": token} if token else {})}
        page = await _call(api, "GET", resource_path(resource), params=params)
        for obj in page.get("items") or []:
            meta = obj["metadata"]
            path = resource_path(resource, meta.get("namespace"), meta["name"], sub=sub)
            try:
                await _call(api, "PATCH", path, body={}, content_type=MERGE)
            except ApiError as error:
                if error.status != 404:
                    raise
            count += 1
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return count


async def _call(
    api: Api,
    method: str,
    path: str,
    *,
    params: dict[str, str] | None = None,
    body: object = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    try:
        return await api.request(method, path, params=params, body=body, content_type=content_type)
    except ApiError as error:
        if error.status == 403:
            raise Forbidden(f"{method} {path}: {error.reason}") from None
        raise
