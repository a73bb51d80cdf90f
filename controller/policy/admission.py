"""The admission of a TerraformPolicy: every rule compiled, type-checked and costed, as
the runner will compile it. A refusal names the rule's field and the position in its
expression; it quotes the policy's own text, never an object's value."""

from __future__ import annotations

from controller.core.admission.refusal import Refusal
from controller.core.spec.plan_policies import rules_of
from controller.policy.rules import Refused, compile_rule
from runtime.jsonobj import Json


def refusals(policy: Json) -> list[Refusal]:
    found = []
    for index, rule in enumerate(rules_of(policy)):
        compiled = compile_rule(rule)
        if isinstance(compiled, Refused):
            found.append(Refusal(f"spec.rules[{index}].{compiled.field}", compiled.message))
    return found
