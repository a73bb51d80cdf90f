"""Fields that may not change once stored.

A template's spec never changes: Cluster API clones machines from it, so a change would
apply to some clones and not others; users point at a new template instead. A machine's
inputs never change: a machine applies once, and new inputs mean a new machine (Cluster
API rolls one out). The CRDs say the same of machines with CEL rules; the webhook says it
first, in the same words for every kind, and for objects stored before a rule existed.

A template's rule is the webhook's alone: Cluster API's topology controller learns
whether a template it would write differs from the stored one by a dry-run apply of it,
annotated `topology.cluster.x-k8s.io/dry-run`, and rotates the template (a new name)
when it does. That dry run must pass, as it does for Cluster API's own providers
(util/topology.IsDryRunRequest); a CEL rule cannot see that a request is a dry run."""

from __future__ import annotations

from typing import Final

from controller.core.admission.kinds import PLAN, TEMPLATES
from controller.core.admission.refusal import Refusal
from controller.core.basics.names import MACHINE
from runtime.jsonobj import Json

# What a TerraformMachine may not change (docs/api.md, "A machine's inputs are immutable"):
# its inputs, and the identity it was created with (the credentials that made an instance
# are the ones that destroy it), as the public CAPTF has it.
MACHINE_INPUTS = ("source", "variables", "variablesFrom", "identityRef")
# On the objects of the topology controller's dry-run applies (Cluster API's
# TopologyDryRunAnnotation).
TOPOLOGY_DRY_RUN: Final = "topology.cluster.x-k8s.io/dry-run"
# What an approver writes on a TerraformPlan; the rest is what was planned.
PLAN_APPROVAL = frozenset({"approved", "approvedBy"})


def _spec(obj: Json) -> Json:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def template_changes(kind: str, old: Json, new: Json) -> list[Refusal]:
    # Values, so an apply that changes nothing passes. spec.capacity and spec.nodeInfo
    # (scale from zero) stay mutable: they describe the node, they make no machine.
    if _spec(old).get("template") == _spec(new).get("template"):
        return []
    rule = f"{kind} spec.template is immutable: create a new template and point its users at it"
    return [Refusal("spec.template", rule)]


def machine_changes(old: Json, new: Json) -> list[Refusal]:
    before, after = _spec(old), _spec(new)
    found = [
        Refusal(f"spec.{name}", "is immutable on a TerraformMachine: create a new machine")
        for name in MACHINE_INPUTS
        if before.get(name) != after.get(name)
    ]
    # providerID is written once, by the controller, from the module's output.
    was = before.get("providerID")
    if was and after.get("providerID") != was:
        found.append(Refusal("spec.providerID", "is immutable once set"))
    return found


def plan_changes(old: Json, new: Json) -> list[Refusal]:
    """A plan records what was planned for one target; only its approval changes
    (controller/core/admission/approval.py says how)."""
    before, after = _spec(old), _spec(new)
    fields = (before.keys() | after.keys()) - PLAN_APPROVAL
    changed = sorted(k for k in fields if before.get(k) != after.get(k))
    found = [
        Refusal(f"spec.{k}", "is immutable: the plan records what was planned") for k in changed
    ]
    if before.get("approved") is True and after.get("approved") is not True:
        found.append(Refusal("spec.approved", "cannot be withdrawn once true"))
    return found


def topology_dry_run(dry_run: bool, obj: Json) -> bool:
    """A dry run of the topology controller: the request's dryRun, and the annotation."""
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    return dry_run and isinstance(notes, dict) and TOPOLOGY_DRY_RUN in notes


def changes(kind: str, old: Json, new: Json, *, dry_run: bool = False) -> list[Refusal]:
    """Every immutable field an update of `kind` changes; `dry_run`: the request's."""
    if kind in TEMPLATES:
        if topology_dry_run(dry_run, new):
            return []
        return template_changes(kind, old, new)
    if kind == MACHINE:
        return machine_changes(old, new)
    if kind == PLAN:
        return plan_changes(old, new)
    return []
