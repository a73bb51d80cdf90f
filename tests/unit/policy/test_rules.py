"""Rules compile, type-check and cost as admission needs: a bad or too costly expression
is refused with its position; what is admitted runs."""

from __future__ import annotations

import pytest

from controller.policy.checked_ast import read
from controller.policy.cost import ADMISSION_SIZE, EVALUATION_LIMIT
from controller.policy.rules import (
    Action,
    Compiled,
    Refused,
    Rule,
    Scope,
    compile_rule,
    environment,
)


def _rule(expression: str, scope: Scope = Scope.RESOURCE) -> Rule:
    return Rule("p", "r", scope, Action.DENY, expression, "m")


@pytest.mark.parametrize(
    ("expression", "scope"),
    [
        (
            "resource.type == 'terraform_data' && 'delete' in resource.change.actions",
            Scope.RESOURCE,
        ),
        ("resource.change.actions == ['delete', 'create']", Scope.RESOURCE),
        ("object.labels['tier'] == 'prod' && cluster.name.startsWith('prod-')", Scope.RESOURCE),
        (
            "has(resource.change.after.region) && resource.change.after.region != 'eu'",
            Scope.RESOURCE,
        ),
        ("resource.address.split('.').size() > 3", Scope.RESOURCE),
        # Two deep with a short loop: quadratic with a small factor.
        ("resource.x.exists(a, resource.y.exists(b, a == b))", Scope.RESOURCE),
        (
            "plan.resource_changes.filter(r, r.type == 'aws_instance'"
            " && 'create' in r.change.actions).size() > 20",
            Scope.PLAN,
        ),
    ],
)
def test_admitted(expression: str, scope: Scope) -> None:
    compiled = compile_rule(_rule(expression, scope))
    assert isinstance(compiled, Compiled), compiled
    assert compiled.cost.at(ADMISSION_SIZE) <= EVALUATION_LIMIT


@pytest.mark.parametrize(
    ("expression", "scope", "said"),
    [
        # Syntax: the column where the parser stopped.
        ("resource.type == 'a' &&", Scope.RESOURCE, "1:24: Syntax error"),
        # Type checking: an undeclared variable (a Resource rule has no `plan`).
        ("plan.resource_changes.size() > 1", Scope.RESOURCE, "1:5: undeclared reference to 'plan"),
        ("resource.type == 'a'", Scope.PLAN, "1:9: undeclared reference to 'resource"),
        ("size(resource) + 'a' == 'b'", Scope.RESOURCE, "1:16: found no matching overload"),
        # Not a condition.
        ("resource.type", Scope.RESOURCE, "1:1: is of type dyn, not bool"),
        ("1 + 1", Scope.RESOURCE, "is of type int, not bool"),
        # Too costly: comprehensions nested three deep, pointing at the innermost.
        (
            "resource.x.exists(a, resource.x.exists(b, resource.x.exists(c, a == c)))",
            Scope.RESOURCE,
            "1:60: too costly",
        ),
        # A scan of a collection inside a comprehension over another.
        (
            "plan.resource_changes.all(r, r.address in plan.resource_changes.map(c, c.address))",
            Scope.PLAN,
            "too costly",
        ),
    ],
)
def test_refused_with_position(expression: str, scope: Scope, said: str) -> None:
    refused = compile_rule(_rule(expression, scope))
    assert isinstance(refused, Refused)
    assert refused.field == "expression"
    assert said in refused.message


def test_a_second_line_is_counted_in_the_position() -> None:
    source = "resource.type == 'a' &&\n  resource.x.exists(a, resource.x.all(b, b in resource.y))"
    refused = compile_rule(_rule(source))
    assert isinstance(refused, Refused)
    assert refused.message.startswith("2:38: too costly"), refused.message


def test_too_long_is_refused_before_compiling() -> None:
    refused = compile_rule(_rule("true || " * 300 + "true"))
    assert isinstance(refused, Refused)
    assert "longer than 2048" in refused.message


def test_the_checked_tree_names_its_comprehensions_and_their_positions() -> None:
    source = "resource.tags.all(k, k != 'x')"
    tree = read(environment(Scope.RESOURCE).compile(source).serialize())
    kinds = []
    stack = [tree.root]
    while stack:
        node = stack.pop()
        kinds.append((node.kind, node.name))
        stack.extend(node.children)
    assert ("comprehension", "k") in kinds
    assert ("ident", "resource") in kinds
    assert ("select", "tags") in kinds
    # A macro's position is its opening parenthesis.
    assert tree.root.kind == "comprehension"
    assert tree.positions[tree.root.id] == source.index(".all(") + len(".all")
