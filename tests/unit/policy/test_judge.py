"""Judging plans: what matches, fail-closed on what cannot be judged, and the budget
test: hostile plans (100,000 changes, deep nesting) are judged within the stated cost
limit, counted, never timed."""

from __future__ import annotations

from typing import Any

import pytest

from controller.policy.judge import (
    MAX_DEPTH,
    PLAN_COST_LIMIT,
    Why,
    changes_of,
    judge,
    measure,
)
from controller.policy.rules import Action, Rule, Scope

SUBJECT: dict[str, Any] = {
    "object": {"kind": "TerraformCluster", "namespace": "team-a", "name": "demo", "labels": {}},
    "cluster": {"name": "demo", "labels": {"env": "prod"}},
}
NO_GROUP_REPLACE = Rule(
    "no-replace",
    "group",
    Scope.RESOURCE,
    Action.DENY,
    "resource.address == 'terraform_data.group' && resource.change.actions == ['delete', 'create']",
    "terraform_data.group is never replaced",
)
AT_MOST_TWO = Rule(
    "counts",
    "two",
    Scope.PLAN,
    Action.REQUIRE_APPROVAL,
    "plan.resource_changes.filter(r, 'create' in r.change.actions).size() > 2",
    "more than two creates need an approval",
)
REGIONS = Rule(
    "regions",
    "eu",
    Scope.RESOURCE,
    Action.WARN,
    "resource.change.after != null && 'region' in resource.change.after"
    " && !(resource.change.after.region in ['eu-west-1', 'eu-central-1'])",
    "only eu regions",
)


def change(address: str, *actions: str, after: Any = None) -> dict[str, Any]:
    kind, _, name = address.rpartition(".")
    return {
        "address": address,
        "type": kind.rpartition(".")[2],
        "name": name,
        "change": {"actions": list(actions), "before": None, "after": after},
    }


def plan(*changes: dict[str, Any]) -> dict[str, Any]:
    return {"format_version": "1.2", "resource_changes": list(changes)}


def test_a_plan_that_matches_nothing_complies() -> None:
    shown = plan(change("terraform_data.group", "update", after={"region": "eu-west-1"}))
    found = judge([NO_GROUP_REPLACE, AT_MOST_TWO, REGIONS], shown, SUBJECT)
    assert found.judged
    assert found.violations == ()
    assert found.action is None


def test_each_rule_names_what_matched_and_the_strongest_action_wins() -> None:
    shown = plan(
        change("terraform_data.group", "delete", "create", after={"region": "us-east-1"}),
        change("terraform_data.a", "create", after={"region": "eu-west-1"}),
        change("terraform_data.b", "create", after={"region": "us-east-1"}),
        change("terraform_data.c", "no-op", after={"region": "us-east-1"}),
    )
    found = judge([REGIONS, AT_MOST_TWO, NO_GROUP_REPLACE], shown, SUBJECT)
    by_rule = {v.rule.name: v for v in found.violations}
    assert by_rule["group"].addresses == ("terraform_data.group",)
    assert by_rule["group"].why is Why.MATCHED
    # A Plan rule names no addresses; the no-op change is seen by no rule.
    assert by_rule["two"].addresses == ()
    assert by_rule["eu"].addresses == ("terraform_data.group", "terraform_data.b")
    assert found.action is Action.DENY


def test_the_subject_is_visible_to_rules() -> None:
    rule = Rule("p", "prod", Scope.PLAN, Action.DENY, "cluster.labels['env'] == 'prod'", "m")
    found = judge([rule], plan(change("terraform_data.a", "create")), SUBJECT)
    assert [v.rule.name for v in found.violations] == ["prod"]


def test_a_failing_evaluation_matches_its_rule() -> None:
    # No key `region` on a change without one: an error, and fail closed.
    rule = Rule("p", "r", Scope.RESOURCE, Action.DENY, "resource.change.after.region == 'x'", "m")
    found = judge([rule], plan(change("terraform_data.a", "create", after={})), SUBJECT)
    [violation] = found.violations
    assert violation.why is Why.ERROR
    assert violation.addresses == ("terraform_data.a",)


def test_a_rule_stored_without_compiling_matches() -> None:
    broken = Rule("p", "broken", Scope.RESOURCE, Action.DENY, "resource.type ==", "m")
    found = judge([broken], plan(), SUBJECT)
    [violation] = found.violations
    assert violation.why is Why.INVALID
    assert found.action is Action.DENY


def test_only_changes_are_shown() -> None:
    shown = plan(change("a.x", "no-op"), change("a.y", "read"), change("a.z", "delete"))
    assert [c["address"] for c in changes_of(shown)] == ["a.z"]


def test_measure_walks_without_recursion() -> None:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    shape = measure(deep)
    assert shape.depth == 100_001
    assert shape.values == 100_001
    assert shape.largest == 1


# --- the budget test ---


def _hostile_wide(count: int) -> dict[str, Any]:
    return plan(
        *(
            change(f"terraform_data.r[{i}]", "create", after={"region": "eu-west-1", "i": i})
            for i in range(count)
        )
    )


def test_a_hundred_thousand_changes_are_judged_within_the_limit() -> None:
    rules = [NO_GROUP_REPLACE, REGIONS]
    found = judge(rules, _hostile_wide(100_000), SUBJECT)
    assert found.judged
    assert found.cost <= PLAN_COST_LIMIT
    assert found.violations == ()


def test_a_plan_rule_over_more_changes_than_the_iteration_budget_fails_closed() -> None:
    every = Rule(
        "p", "all", Scope.PLAN, Action.DENY, "!plan.resource_changes.all(r, r.type != 'x')", "m"
    )
    found = judge([every], _hostile_wide(10_000), SUBJECT)
    assert found.judged
    [violation] = found.violations
    # cel-cpp stopped the evaluation at its iteration budget: the rule matches.
    assert violation.why is Why.ERROR
    assert "budget" in violation.detail


def test_a_filter_over_a_large_plan_is_over_the_limit() -> None:
    # A filter copies its list at every step (cel-cpp): about n**2 units.
    found = judge([AT_MOST_TWO], _hostile_wide(9_000), SUBJECT)
    assert not found.judged
    assert found.cost > PLAN_COST_LIMIT
    assert [v.why for v in found.violations] == [Why.LIMIT]
    within = judge([AT_MOST_TWO], _hostile_wide(3_000), SUBJECT)
    assert within.judged
    assert [v.why for v in within.violations] == [Why.MATCHED]


def test_over_the_cost_limit_nothing_is_evaluated_and_every_rule_matches() -> None:
    rules = [NO_GROUP_REPLACE, REGIONS]
    found = judge(rules, _hostile_wide(1_000), SUBJECT, limit=10_000)
    assert not found.judged
    assert found.cost > 10_000
    assert {(v.rule.name, v.why) for v in found.violations} == {
        ("group", Why.LIMIT),
        ("eu", Why.LIMIT),
    }
    assert found.action is Action.DENY


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 900])
def test_deep_nesting_is_not_judged(depth: int) -> None:
    nested: Any = {"region": "us-east-1"}
    for _ in range(depth):
        nested = {"inner": nested}
    found = judge([REGIONS], plan(change("terraform_data.deep", "create", after=nested)), SUBJECT)
    assert not found.judged
    assert [v.why for v in found.violations] == [Why.LIMIT]
    assert "deep" in found.violations[0].detail


def test_nesting_within_the_bound_is_judged() -> None:
    nested: Any = {"region": "us-east-1"}
    for _ in range(MAX_DEPTH - 6):
        nested = {"inner": nested}
    found = judge([REGIONS], plan(change("terraform_data.deep", "create", after=nested)), SUBJECT)
    assert found.judged
