"""Judging a plan: every selected rule evaluated over OpenTofu's JSON plan, within a
cost limit, into the violations the runner reports.

What a rule sees: `plan` is `tofu show -json` of the plan with `resource_changes`
holding only the entries that change something (no-op and read entries are left out,
and `prior_state`, `planned_values` and `configuration` are not given); a `Resource`
rule gets each of those entries as `resource`. `object` is the CAPTF object (kind,
namespace, name, labels) and `cluster` its Cluster API Cluster (name, labels).

What is bounded, before anything is evaluated (`measure`):
- nesting: a plan with a value nested deeper than MAX_DEPTH is not judged;
- cost: each evaluation is counted as its rule's cost polynomial (cost.py) at `n`, the
  largest list or map of its input (at most cel-cpp's iteration budget), plus the
  number of values in that input (their conversion); the sum over every evaluation of
  every rule must stay within PLAN_COST_LIMIT, else the plan is not judged.
A plan that is not judged matches every selected rule: each rule's action applies
(a Deny stops it), and the violation says why. During evaluation, cel-cpp stops any one
evaluation after 9,999 comprehension iterations in all; an evaluation that stops so, or
fails for any other reason (a missing key, a type error), matches its rule too. Fail
closed: a plan is let through only by rules that were evaluated and returned false."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from cel_expr_python import cel

from controller.policy.cost import ITERATION_BUDGET
from controller.policy.rules import (
    ACTIONS,
    Action,
    Compiled,
    Refused,
    Rule,
    Scope,
    compile_rule,
    environment,
)
from runtime.jsonobj import Json

# Deeper than any provider schema nests; a deeper value is a hostile plan's.
MAX_DEPTH = 64
# What one evaluation costs beyond its rule's steps: the call into cel-cpp and back
# (measured at about as much as twenty steps of a simple rule).
EVALUATION_UNITS = 20
# Measured on a 2-core machine (docs/decisions.md, "Policies on plans"): a plan of 100,000
# changes under two Resource rules and a Plan rule counts about 9.3 million units and
# takes 3.8 CPU seconds; a filter over 7,000 changes counts 49 million and takes about
# 1.5 s (the copies it counts are cheap ones).
PLAN_COST_LIMIT = 50_000_000
# Actions that change nothing: such entries are not shown to the rules.
INERT_ACTIONS = frozenset({"no-op", "read"})


class Why(StrEnum):
    MATCHED = "matched"  # the expression returned true
    ERROR = "error"  # the evaluation failed (or hit the iteration budget)
    INVALID = "invalid"  # the rule does not compile (stored while the webhook was down)
    LIMIT = "limit"  # the plan was not judged: over the cost limit, or nested too deep


@dataclass(frozen=True)
class Violation:
    rule: Rule
    why: Why
    addresses: tuple[str, ...] = ()  # the matched changes of a Resource rule, all of them
    detail: str = ""  # for `captf policy test` only: may quote the plan, never reported


@dataclass(frozen=True)
class Judgement:
    violations: tuple[Violation, ...]
    cost: int  # the units counted (what the limit bounds)
    judged: bool  # False: not evaluated (over a bound); every rule matched

    @property
    def action(self) -> Action | None:
        """The strongest action among the violations; None when the plan complies."""
        found = {v.rule.action for v in self.violations}
        return next((a for a in ACTIONS if a in found), None)

    def of(self, action: Action) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.rule.action == action)


@dataclass(frozen=True)
class Shape:
    """What bounds one evaluation's input: its values, its largest list or map, its depth."""

    values: int = 0
    largest: int = 0
    depth: int = 0


def measure(value: object) -> Shape:
    """The shape of a JSON value, walked without recursion (a hostile depth cannot
    exhaust the stack here)."""
    values, largest, depth = 0, 0, 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        current, level = stack.pop()
        values += 1
        depth = max(depth, level)
        if isinstance(current, dict):
            largest = max(largest, len(current))
            stack.extend((v, level + 1) for v in current.values())
        elif isinstance(current, list):
            largest = max(largest, len(current))
            stack.extend((v, level + 1) for v in current)
    return Shape(values, largest, depth)


def changes_of(plan: Json) -> list[Json]:
    """The resource changes a rule sees: those whose actions change something."""
    out = []
    for entry in plan.get("resource_changes") or []:
        actions = (entry.get("change") or {}).get("actions") if isinstance(entry, dict) else None
        if isinstance(actions, list) and not set(actions) <= INERT_ACTIONS:
            out.append(entry)
    return out


@dataclass
class _Count:
    units: int = 0
    depth: int = 0
    shapes: list[Shape] = field(default_factory=list)


def _plan_view(plan: Json, changes: list[Json]) -> Json:
    kept = {k: plan[k] for k in ("format_version", "terraform_version") if k in plan}
    return kept | {"resource_changes": changes}


def judge(
    rules: Sequence[Rule],
    plan: Json,
    subject: Mapping[str, Json],
    *,
    limit: int = PLAN_COST_LIMIT,
) -> Judgement:
    """The violations of `rules` by `plan`; `subject`: the `object` and `cluster`
    variables. Pure, and the same for the same inputs on any machine: the bounds are
    counted, never timed."""
    compiled = [compile_rule(rule) for rule in rules]
    invalid = [
        Violation(c.rule, Why.INVALID, detail=c.message) for c in compiled if isinstance(c, Refused)
    ]
    usable = [c for c in compiled if isinstance(c, Compiled)]
    changes = changes_of(plan)
    view = _plan_view(plan, changes)
    shapes = [measure(c) for c in changes]
    whole = measure(view)
    units = _units(usable, shapes, whole, subject)
    if whole.depth > MAX_DEPTH or units > limit:
        why = (
            f"nests values {whole.depth} deep (at most {MAX_DEPTH})"
            if whole.depth > MAX_DEPTH
            else (f"would cost {units:,} units to judge (at most {limit:,})")
        )
        unjudged = [Violation(c.rule, Why.LIMIT, detail=f"the plan {why}") for c in usable]
        return Judgement((*invalid, *unjudged), units, judged=False)
    found = [*invalid, *_evaluate(usable, changes, view, subject)]
    return Judgement(tuple(found), units, judged=True)


def _units(
    usable: Sequence[Compiled], shapes: Sequence[Shape], whole: Shape, subject: Mapping[str, Json]
) -> int:
    """The cost of judging: per input (the plan once, each change once, shared by the
    rules of its scope) its values, and per evaluation its rule's steps at the input's
    `n` plus EVALUATION_UNITS."""
    extra = sum(measure(v).values for v in subject.values())
    per_plan = [c for c in usable if c.rule.scope is Scope.PLAN]
    per_change = [c for c in usable if c.rule.scope is Scope.RESOURCE]
    units = 0
    for inputs, shown in ((per_plan, (whole,)), (per_change, shapes)):
        for shape in shown if inputs else ():
            n = min(shape.largest, ITERATION_BUDGET)
            units += shape.values + extra
            units += sum(c.cost.at(n) + EVALUATION_UNITS for c in inputs)
    return units


def _evaluate(
    usable: Sequence[Compiled], changes: Sequence[Json], view: Json, subject: Mapping[str, Json]
) -> Iterator[Violation]:
    per_plan = [c for c in usable if c.rule.scope is Scope.PLAN]
    per_change = [c for c in usable if c.rule.scope is Scope.RESOURCE]
    if per_plan:
        activation = environment(Scope.PLAN).Activation({"plan": view, **subject})
        for c in per_plan:
            outcome = _run(c, activation)
            if outcome is not None:
                yield Violation(c.rule, outcome[0], detail=outcome[1])
    matched: dict[int, list[str]] = {i: [] for i in range(len(per_change))}
    failed: dict[int, str] = {}
    env = environment(Scope.RESOURCE)
    for change in changes if per_change else ():
        activation = env.Activation({"resource": change, **subject})
        for i, c in enumerate(per_change):
            outcome = _run(c, activation)
            if outcome is None:
                continue
            matched[i].append(str(change.get("address", "?")))
            if outcome[0] is Why.ERROR:
                failed.setdefault(i, outcome[1])
    for i, c in enumerate(per_change):
        if matched[i]:
            why = Why.ERROR if i in failed else Why.MATCHED
            yield Violation(c.rule, why, tuple(matched[i]), failed.get(i, ""))


def _run(c: Compiled, activation: cel.Activation) -> tuple[Why, str] | None:
    """None when the rule does not match; else why it does (true, or a failure)."""
    try:
        value = c.program.eval(activation)
    except RuntimeError as exc:
        return Why.ERROR, str(exc)
    if value.type() == cel.Type.BOOL:
        return (Why.MATCHED, "") if value.value() is True else None
    return Why.ERROR, f"{value.type().name().lower()}: {value.value()}"
