"""Every admission check of one request, composed: what the webhook asks and what
DecideOp asks again at reconcile."""

from __future__ import annotations

from controller.core.admission import env, identity, images, immutable, reserved, security
from controller.core.admission.kinds import IDENTITY, PLAN, inputs_spec, role_of
from controller.core.admission.refusal import Refusal
from runtime.jsonobj import Json


def spec_refusals(kind: str, obj: Json) -> list[Refusal]:
    """The checks of one object on its own (no stored version, no API): reserved variable
    names, the module image's reference, the Jobs' security context and extra env, the
    identity reference. The same for a create, an update and a reconcile."""
    if kind == IDENTITY:
        return identity.identity_refusals(obj)
    found = inputs_spec(kind, obj)
    if found is None:
        return plan_refusals(obj) if kind == PLAN else []
    prefix, spec = found
    return [
        *reserved.refusals(spec, role_of(kind), prefix),
        *images.refusals(spec, prefix),
        *security.refusals(spec, prefix),
        *env.refusals(spec, prefix),
        *identity.ref_refusals(spec, prefix),
    ]


def plan_refusals(plan: Json) -> list[Refusal]:
    """An approved plan records its approver (the mutating webhook writes it first)."""
    spec = plan.get("spec")
    if isinstance(spec, dict) and spec.get("approved") is True and not spec.get("approvedBy"):
        return [Refusal("spec.approvedBy", "is required once spec.approved is true")]
    return []


def update_refusals(kind: str, old: Json, new: Json, *, dry_run: bool = False) -> list[Refusal]:
    """The checks of an update: the object's own, then what may not change (`dry_run`:
    the request's; the topology controller's dry runs may change a template)."""
    return [*immutable.changes(kind, old, new, dry_run=dry_run), *spec_refusals(kind, new)]
