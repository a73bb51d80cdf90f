"""Scale from zero for a MachinePool: the TerraformMachinePool's own `status.capacity`,
`status.nodeInfo`, `status.capacitySource` and CapacityResolved condition.

The cluster-autoscaler's Cluster API provider follows a scalable resource's
`spec.template.spec.infrastructureRef` and reads `status.capacity` / `status.nodeInfo`
there. A MachineDeployment's names a TerraformMachineTemplate; a MachinePool's names
the TerraformMachinePool itself, so the pool shows what a template shows, by the same
rule (`templates.capacity_status`): `spec.capacity` / `spec.nodeInfo`, else the module
image's `io.captf.capacity` / `io.captf.node-info` labels.

The pool makes no lookup of its own for it: it reads the answer its pass has anyway
(`Facts.image`: the lookup made before each apply, plan and drift check, or io's short
cache of another object's). Between lookups the image's values stay as shown, and the
spec's stand. A failed lookup that was not this pool's own says nothing about it.
Pure; the values are written with the rest of the pool's status (plan/status.py), once."""

from __future__ import annotations

from controller.core.basics.names import POOL
from controller.core.plan.accounting import Event
from controller.core.plan.status import Capacity
from controller.core.plan.templates import capacity_event, capacity_status
from controller.core.spec.image import ImageFact, Resolved
from controller.core.spec.refs import module_image
from runtime.jsonobj import Json


def pool_capacity(obj: Json, fact: ImageFact | None) -> Capacity | None:
    """The pool's scale-from-zero status; None for any other kind."""
    if obj.get("kind") != POOL:
        return None
    spec = obj.get("spec") or {}
    image = module_image(spec)
    reference = image.reference if image is not None else None
    if fact is not None and (
        fact.reference != reference or not (fact.asked or isinstance(fact, Resolved))
    ):
        fact = None
    fields, condition = capacity_status(spec, reference, fact, obj.get("status") or {})
    return Capacity(fields, condition)


def pool_capacity_event(obj: Json, old: Json, new: Json) -> tuple[Event, ...]:
    """The pool's CapacityResolved Event when its values change. No ImageInspectFailed
    Warning, as a template records: a pool's failed lookup is its ImageResolved
    condition's to tell, and its wait's to retry."""
    return capacity_event(obj, old, new) if obj.get("kind") == POOL else ()
