"""The reconcile of one TerraformMachineTemplate or TerraformMachinePoolTemplate: its
scale-from-zero status (the pass is the core's, controller/core/plan/templates.py).

A template runs no Job, holds no finalizer and reads no state. Observe, facts, plan,
carry out, each once:

  observe    the template, from the cache.
  facts      the registry lookup the core says the template needs (`template_lookup`,
             pure, from the template alone): its module image, looked up
             (controller/io/registry.py, with its short cache) with the pull credentials
             of the ServiceAccount its Jobs would run as. None needed: no fact.
  plan       the core's pass (`template_pass`), once, with the answer.
  carry out  Events, before the status that shows what they announce (named
             once-only); then the status, one merge patch of the fields the pass changes.

A template changed meanwhile wakes the key again. The status patch carries the
resourceVersion read (unlike api.patch_status): its maps are patched key by key against
what was read, and a template's own status write wakes nothing that would repair a
patch made from a stale read."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from controller.core import TemplatePass, template_lookup, template_pass
from controller.core.basics.names import GROUP, TEMPLATE_PLURALS, VERSION
from controller.io import api
from controller.io.api import Api
from controller.io.caches import Caches
from controller.io.registry import ImageRegistry
from runtime.cache.resource import Resource
from runtime.clock import Clock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.loop import DONE, Result, requeue_after

log = logging.getLogger(__name__)


@dataclass
class TemplateKeeper:
    client: Api
    caches: Caches
    clock: Clock
    registry: ImageRegistry

    async def reconcile(self, kind: str, namespace: str, name: str) -> Result:
        template = self.caches.template(kind, namespace, name)
        if template is None:
            return DONE
        lookup = template_lookup(template)
        fact = None if lookup is None else await self.registry.resolve(self.client, lookup)
        todo = template_pass(template, fact, self.clock.now())
        try:
            await self._write(kind, template, todo)
        except ApiError as err:
            if err.status in (404, 409):
                return Result(requeue=err.status == 409)
            raise
        return requeue_after(todo.requeue) if todo.requeue else DONE

    async def _write(self, kind: str, template: Json, todo: TemplatePass) -> None:
        now = self.clock.now()
        for event in todo.events:
            await api.record_event(self.client, api.event_body(template, event, now))
        if todo.status is None:
            return
        meta = template["metadata"]
        resource = Resource(GROUP, VERSION, TEMPLATE_PLURALS[kind])
        path = api.resource_path(resource, meta["namespace"], meta["name"], sub="status")
        # Over the version read: a map the pass shrinks (a capacity without the GPU) is
        # patched key by key against what it read, so a patch from a cache that has not
        # seen the last write would leave that write's keys in place (and no status-only
        # change wakes a template again). A 409 retries the key with a newer read.
        await api.merge_patch(
            self.client, path, {"status": todo.status}, version=meta.get("resourceVersion")
        )
        log.info("%s %s/%s: capacity status written", kind, meta["namespace"], meta["name"])
