"""The controller's reconcilers, by the kind a key names: the identities' own
(controller/io/identities.py), the templates' (controller/io/templates.py: their
scale-from-zero status) and the CAPTF objects' (controller/io/reconciler.py). They
share one work queue, so the wakes of both go through one rate limiter and one set of
workers; neither reconciler knows of the other."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics.names import IDENTITY, TEMPLATE_PLURALS
from controller.io.identities import IdentityKeeper
from controller.io.keys import parse_key
from controller.io.reconciler import Reconciler
from controller.io.templates import TemplateKeeper
from controller.io.triggers import Triggers
from runtime.loop import Result


@dataclass
class ByKind:
    objects: Reconciler
    identities: IdentityKeeper
    templates: TemplateKeeper
    triggers: Triggers | None = None  # counts each reconcile under what woke it

    async def reconcile(self, key: str) -> Result:
        if self.triggers is None:
            return await self._reconcile(key)
        self.triggers.reconciling(key)
        try:
            result = await self._reconcile(key)
        except Exception:
            self.triggers.ended(key, None)
            raise
        self.triggers.ended(key, result)
        return result

    async def _reconcile(self, key: str) -> Result:
        kind, namespace, name = parse_key(key)
        if kind == IDENTITY:
            return await self.identities.reconcile(name)
        if kind in TEMPLATE_PLURALS:
            return await self.templates.reconcile(kind, namespace, name)
        return await self.objects.reconcile(key)
