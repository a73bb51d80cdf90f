"""The reconcile of one TerraformClusterIdentity: read its facts, carry out its pass.

The pass itself is the core's (controller/core/plan/identities.py). Here: the identity,
its users and mirrors and the Namespaces from the caches; its Secret read live (its data
is what a mirror copies, and is held only for the writes of this pass); then, in order:

  1. finalizer added   Before anything else: an identity in use cannot go.
  2. mirrors written   Each with the Secret's data: created, or its data and annotation
                       set by a JSON patch; a 409 (one exists already) retries the key.
  3. mirrors deleted   The revocation; a mirror already gone is fine.
  4. status            One merge patch.
  5. finalizer removed Last, once nothing names the identity and its mirrors are gone.

No value is logged or written anywhere but into the mirrors."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from controller.core import (
    IdentityPass,
    SourceSecret,
    identity_in_use,
    identity_pass,
    secret_ref_of,
)
from controller.core.basics.names import IDENTITY_FINALIZER
from controller.io import api, finalizers
from controller.io.api import Api
from controller.io.caches import Caches
from controller.io.indexes import BY_IDENTITY
from runtime.clock import Clock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.loop import DONE, Result, requeue_after

log = logging.getLogger(__name__)
JSON_PATCH = "application/json-patch+json"
IDENTITIES = api.IDENTITIES


def identity_path(name: str, sub: str = "") -> str:
    return api.resource_path(IDENTITIES, None, name, sub=sub)


@dataclass
class IdentityKeeper:
    client: Api
    caches: Caches
    clock: Clock

    async def reconcile(self, name: str) -> Result:
        identity = self.caches.identity(name)
        if identity is None:
            return DONE  # gone: its mirrors went before its finalizer did
        source_ns, secret = secret_ref_of(identity)
        path = api.secret_path(source_ns, secret)
        found = await api.get_or_none(self.client, path) if source_ns and secret else None
        data: dict[str, str] = (found or {}).get("data") or {}
        source = None
        if found is not None:
            source = SourceSecret(frozenset(data), str(found["metadata"].get("resourceVersion")))
        users: dict[str, list[str]] = {}
        for obj in self.caches.objects_by(BY_IDENTITY, name):
            ns = obj["metadata"]["namespace"]
            users.setdefault(ns, []).extend(identity_in_use(name, [obj]))
        mirrors = self.caches.mirrors_of(name)
        labels = {namespace: self.caches.namespace_labels(namespace) for namespace in users}
        todo = identity_pass(
            identity,
            source=source,
            users=users,
            namespace_labels=labels,
            mirrors=mirrors,
            now=self.clock.now(),
        )
        try:
            await self._write(identity, todo, data, mirrors)
        except ApiError as err:
            if err.status == 409:
                return Result(requeue=True)
            raise
        return requeue_after(todo.requeue)

    async def _write(
        self, identity: Json, todo: IdentityPass, data: dict[str, str], mirrors: dict[str, Json]
    ) -> None:
        meta = identity["metadata"]
        name = meta["name"]
        if todo.add_finalizer:
            path = identity_path(name)
            identity = await finalizers.add(self.client, path, identity, IDENTITY_FINALIZER)
        for body in todo.write:
            ns = body["metadata"]["namespace"]
            await self._put_mirror(body | {"data": data}, mirrors.get(ns))
            log.info("identity %s: Secret copied to namespace %s", name, ns)
        for ns in todo.delete:
            await _delete_mirror(self.client, ns, mirrors[ns]["metadata"]["name"])
            log.info("identity %s: copy in namespace %s deleted", name, ns)
        if todo.status is not None:
            # The answer's version is the finalizer removal's precondition below.
            body = {"status": todo.status}
            identity = await self.client.request(
                "PATCH", identity_path(name, "status"), body=body, content_type=api.MERGE
            )
        if todo.remove_finalizer:
            await finalizers.remove(
                self.client, identity_path(name), identity, IDENTITY_FINALIZER, missing_ok=False
            )

    async def _put_mirror(self, body: Json, cached: Json | None) -> None:
        """Creates the mirror, or sets the cached one's data and annotation whole (a JSON
        patch: the controller may patch Secrets, never update them)."""
        meta = body["metadata"]
        if cached is None:
            await self.client.request("POST", api.secret_path(meta["namespace"]), body=body)
            return
        ops = [
            {"op": "add", "path": "/data", "value": body["data"]},
            {"op": "add", "path": "/metadata/annotations", "value": meta["annotations"]},
        ]
        path = api.secret_path(meta["namespace"], meta["name"])
        await self.client.request("PATCH", path, body=ops, content_type=JSON_PATCH)


async def _delete_mirror(client: Api, namespace: str, name: str) -> None:
    try:
        await client.request("DELETE", api.secret_path(namespace, name))
    except ApiError as err:
        if err.status != 404:
            raise
