"""The kinds the webhook sees, and which spec of each holds the inputs."""

from __future__ import annotations

from typing import Final

from controller.core.basics.names import CLUSTER, KINDS, MACHINE, POOL
from controller.core.contract.roles import Role
from runtime.jsonobj import Json

IDENTITY: Final = "TerraformClusterIdentity"
PLAN: Final = "TerraformPlan"
# Its rules are compiled by the webhook (controller/policy/admission.py), not here: the
# core does not load the CEL library.
POLICY: Final = "TerraformPolicy"
# A template's spec.template.spec is the spec of the kind it is named after.
TEMPLATES: Final = {f"{kind}Template": kind for kind in KINDS}
ROLES: Final = {CLUSTER: Role.CLUSTER, MACHINE: Role.MACHINE, POOL: Role.MACHINEPOOL}
ADMISSION_KINDS: Final = frozenset({*KINDS, *TEMPLATES, IDENTITY, PLAN, POLICY})


def inputs_spec(kind: str, obj: Json) -> tuple[str, Json] | None:
    """The spec that carries an object's inputs and its path: spec for the three kinds,
    spec.template.spec for their templates; None for other kinds."""
    if kind in KINDS:
        return "spec", _mapping(obj.get("spec"))
    if kind in TEMPLATES:
        template = _mapping(_mapping(obj.get("spec")).get("template"))
        return "spec.template.spec", _mapping(template.get("spec"))
    return None


def role_of(kind: str) -> Role | None:
    """The contract role of a kind or of the kind a template is of."""
    return ROLES.get(TEMPLATES.get(kind, kind))


def _mapping(value: object) -> Json:
    return value if isinstance(value, dict) else {}
