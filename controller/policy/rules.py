"""A TerraformPolicy's rules, compiled: parsed, type-checked and costed with cel-cpp
(through cel-expr-python), or refused with the position of what is wrong.

A rule's expression is CEL over the variables of its scope (`Scope`): a `Resource` rule
runs once per resource change of the plan with `resource` bound to it, a `Plan` rule
once with `plan`; both see `object` and `cluster`. It must be of type bool: true means
the plan (or that change) matches the rule, and the rule's action applies. The same
compilation serves the admission webhook, the runner and `captf policy test`, so what
was admitted is what runs. The rules themselves (`Rule`, `Scope`, `Action`) are the
core's (controller/core/spec/plan_policies.py), which hands them to the runner."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from cel_expr_python import cel
from cel_expr_python.ext import ext_strings

from controller.core.spec.plan_policies import ACTIONS, Action, Rule, Scope
from controller.policy import checked_ast
from controller.policy.cost import ADMISSION_SIZE, EVALUATION_LIMIT, Cost, cost_of, costliest

# The CRD's bounds, repeated for a policy stored while the webhook was down.
EXPRESSION_LIMIT = 2048


_SUBJECT = ("object", "cluster")
_VARIABLES = {Scope.RESOURCE: ("resource", *_SUBJECT), Scope.PLAN: ("plan", *_SUBJECT)}


@dataclass(frozen=True)
class Compiled:
    rule: Rule
    program: cel.Expression
    cost: Cost


@dataclass(frozen=True)
class Refused:
    """Why a rule cannot run: the field, and a message with the position
    (`line:column`, 1-based) where there is one."""

    rule: Rule
    field: str
    message: str


@cache
def environment(scope: Scope) -> cel.Env:
    """The CEL environment of a scope: its variables, each a map of string to dyn (the
    plan's JSON and the object's facts), and the strings extension."""
    json_map = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    return cel.NewEnv(
        variables={name: json_map for name in _VARIABLES[scope]},
        extensions=[ext_strings.ExtStrings()],
    )


_ERROR = re.compile(r"ERROR: <input>:(\d+):(\d+): ([^\n]*)")


def _compile_errors(text: str) -> str:
    """cel-cpp's errors as `line:column: what`, joined; its source excerpts left out."""
    found = [f"{line}:{column}: {what}" for line, column, what in _ERROR.findall(text)]
    return "; ".join(found) or text.splitlines()[0] if text else "does not compile"


def _line_column(source: str, offset: int) -> str:
    before = source[:offset]
    return f"{before.count(chr(10)) + 1}:{offset - (before.rfind(chr(10)) + 1) + 1}"


def compile_rule(rule: Rule) -> Compiled | Refused:
    """The rule compiled, or why not: too long, does not parse or type-check, not of
    type bool, or too costly (cost.py: its cost at ADMISSION_SIZE over EVALUATION_LIMIT,
    pointing at the comprehension that makes it so)."""
    if len(rule.expression) > EXPRESSION_LIMIT:
        return Refused(rule, "expression", f"is longer than {EXPRESSION_LIMIT} characters")
    try:
        program = environment(rule.scope).compile(rule.expression)
    except RuntimeError as exc:
        return Refused(rule, "expression", _compile_errors(str(exc)))
    if program.return_type() != cel.Type.BOOL:
        kind = program.return_type().name().lower()
        return Refused(rule, "expression", f"1:1: is of type {kind}, not bool")
    try:
        tree = checked_ast.read(program.serialize())
    except checked_ast.AstError as exc:
        return Refused(rule, "expression", f"cannot be costed: {exc}")
    cost = cost_of(tree.root)
    worst = cost.at(ADMISSION_SIZE)
    if worst > EVALUATION_LIMIT:
        where = _line_column(rule.expression, tree.positions.get(costliest(tree.root).id, 0))
        message = (
            f"{where}: too costly: {worst:,} steps on a collection of {ADMISSION_SIZE:,}, "
            f"over the limit of {EVALUATION_LIMIT:,} (comprehensions nested too deep, or "
            "a list scan in a nested loop)"
        )
        return Refused(rule, "expression", message)
    return Compiled(rule, program, cost)


def variables(scope: Scope) -> tuple[str, ...]:
    return _VARIABLES[scope]


__all__ = ["ACTIONS", "Action", "Compiled", "Refused", "Rule", "Scope", "compile_rule"]
