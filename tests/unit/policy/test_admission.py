"""The webhook's review of a TerraformPolicy: a rule that does not compile, is not a
condition or is too costly is refused with its field and position; a good one passes."""

from __future__ import annotations

from typing import Any

import pytest

from controller.io.admission import Webhooks
from runtime.jsonobj import Json


class NoApi:
    async def request(self, method: str, path: str, *, body: object = None) -> dict[str, Any]:
        raise AssertionError("a policy's review asks the API nothing")


def policy(*rules: Json) -> Json:
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformPolicy",
        "metadata": {"name": "guard"},
        "spec": {"rules": list(rules)},
    }


def review(obj: Json, operation: str = "CREATE", old: Json | None = None) -> Json:
    request: Json = {
        "kind": {"group": "infrastructure.cluster.x-k8s.io", "kind": "TerraformPolicy"},
        "operation": operation,
        "object": obj,
    }
    return request | ({"oldObject": old} if old is not None else {})


GOOD = {
    "name": "no-replace",
    "expression": "resource.change.actions == ['delete', 'create']",
    "action": "Deny",
    "message": "nothing is replaced",
}


async def test_a_good_policy_is_admitted() -> None:
    answer = await Webhooks(NoApi()).validate(review(policy(GOOD)))
    assert answer.allowed


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        (GOOD | {"expression": "resource.type =="}, "spec.rules[1].expression: 1:17: Syntax error"),
        (GOOD | {"expression": "resource.type"}, "spec.rules[1].expression: 1:1: is of type dyn"),
        (GOOD | {"expression": "plan.x == 1"}, "undeclared reference to 'plan"),
        (
            GOOD
            | {
                "expression": "resource.x.all(a, resource.x.all(b, resource.x.all(c, a != c)))",
                "name": "costly",
            },
            "spec.rules[1].expression: 1:51: too costly",
        ),
    ],
)
async def test_a_bad_rule_is_refused_with_its_position(rule: Json, said: str) -> None:
    named = rule | {"name": rule.get("name", "bad") if rule.get("name") != GOOD["name"] else "bad"}
    answer = await Webhooks(NoApi()).validate(review(policy(GOOD, named)))
    assert not answer.allowed
    assert answer.message.startswith("TerraformPolicy guard: ")
    assert said in answer.message


async def test_an_update_is_reviewed_when_the_spec_changes() -> None:
    bad = policy(GOOD | {"expression": "resource.type"})
    answer = await Webhooks(NoApi()).validate(review(bad, "UPDATE", old=policy(GOOD)))
    assert not answer.allowed
