"""The runner judges the plan of an apply (and a Manual plan) with the policy set its Job
carries, after the plan and before anything applies: Deny stops it (even unguarded, even
approved), RequireApproval holds it for a person unless it carries an approved plan, Warn
lets it apply. Every plan, apply and drift check reports what the plan changes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from controller.core.jobs.job import Outcome
from controller.core.jobs.policy_report import Verdict
from controller.core.spec.plan_policies import Action, PolicySet, Rule, Scope
from controller.runner.ops import execute
from tests.runner_fakes import FakeKube, secret
from tests.unit.runner.test_runner_ops import (
    HASH,
    ScriptedTofu,
    environ,
    plan_json,
    plan_secret,
    tfstate,
    with_state,
)


@pytest.fixture
def kube() -> FakeKube:
    k = FakeKube()
    module = {"module.main.tf": b'resource "terraform_data" "x" {}\n', "variables.json": b"{}"}
    k.put(secret("c-inputs-abababab", module, {"captf.io/inputs-hash": HASH}))
    return k


REPLACE_GROUP = "resource.address == 'group' && resource.change.actions == ['delete', 'create']"


def policies(*rules: tuple[str, Action]) -> str:
    found = PolicySet(
        tuple(
            Rule("guard", f"rule-{i}", Scope.RESOURCE, action, expression, f"says {i}")
            for i, (expression, action) in enumerate(rules)
        ),
        {"object": {"kind": "TerraformCluster", "labels": {}}, "cluster": {"labels": {}}},
    )
    return found.encode()


REPLACING = plan_json(("keep", ["update"]), ("group", ["delete", "create"]))


async def test_a_denied_plan_never_applies_even_unguarded(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4)
    tofu = ScriptedTofu(tmp_path, plan=REPLACING, new_state=tfstate(5))
    env = environ(CAPTF_POLICIES=policies((REPLACE_GROUP, Action.DENY)), CAPTF_GUARDED="false")
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.POLICY_DENIED
    assert "apply" not in tofu.commands()
    assert kube.secrets["c-state"]["metadata"]["annotations"]["captf.io/serial"] == "4"
    assert result.policy is not None
    assert result.policy.verdict is Verdict.DENIED
    [violation] = result.policy.violations
    assert (violation.policy, violation.rule, violation.addresses) == (
        "guard",
        "rule-0",
        ("group",),
    )
    assert "policy guard rule rule-0 (Deny): says 0 [group]" in result.message


async def test_a_denied_plan_never_applies_even_approved(kube: FakeKube, tmp_path: Path) -> None:
    kube.put(plan_secret(REPLACING))
    tofu = ScriptedTofu(tmp_path, plan=REPLACING, new_state=tfstate(1))
    env = environ(
        CAPTF_POLICIES=policies((REPLACE_GROUP, Action.DENY)), CAPTF_APPROVED_PLAN_SECRET="c-plan"
    )
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.POLICY_DENIED
    assert "apply" not in tofu.commands()


async def test_require_approval_holds_an_auto_apply_and_keeps_its_plan(
    kube: FakeKube, tmp_path: Path
) -> None:
    tofu = ScriptedTofu(tmp_path, plan=REPLACING, new_state=tfstate(1))
    env = environ(
        CAPTF_POLICIES=policies((REPLACE_GROUP, Action.REQUIRE_APPROVAL)),
        CAPTF_PLAN_SECRET="c-apply-1",
    )
    result = await execute(env, kube, tofu, tmp_path)
    assert (result.outcome, result.plan_secret) == (Outcome.BLOCKED, "c-apply-1")
    assert result.policy is not None
    assert result.policy.verdict is Verdict.APPROVAL_REQUIRED
    assert "apply" not in tofu.commands()
    assert "c-apply-1" in kube.secrets


async def test_require_approval_lets_an_approved_plan_apply(kube: FakeKube, tmp_path: Path) -> None:
    kube.put(plan_secret(REPLACING))
    tofu = ScriptedTofu(tmp_path, plan=REPLACING, new_state=tfstate(1))
    env = environ(
        CAPTF_POLICIES=policies((REPLACE_GROUP, Action.REQUIRE_APPROVAL)),
        CAPTF_APPROVED_PLAN_SECRET="c-plan",
    )
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert result.policy is not None
    assert result.policy.verdict is Verdict.APPROVED
    assert "apply" in tofu.commands()


async def test_warn_applies_and_reports(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, plan=REPLACING, new_state=tfstate(1))
    env = environ(CAPTF_POLICIES=policies((REPLACE_GROUP, Action.WARN)))
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert result.policy is not None
    assert result.policy.verdict is Verdict.WARNED


async def test_an_unreadable_policy_set_is_denied(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, plan=REPLACING, new_state=tfstate(1))
    result = await execute(environ(CAPTF_POLICIES="too-large"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.POLICY_DENIED
    assert "apply" not in tofu.commands()


async def test_no_policies_no_report(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, plan=REPLACING, new_state=tfstate(1))
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert result.policy is None


async def test_a_denied_manual_plan_keeps_no_plan(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, plan=REPLACING)
    env = environ(
        "plan", CAPTF_PLAN_SECRET="c-plan-1", CAPTF_POLICIES=policies((REPLACE_GROUP, Action.DENY))
    )
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.POLICY_DENIED
    assert "c-plan-1" not in kube.secrets


async def test_every_plan_apply_and_drift_check_reports_its_changes(
    kube: FakeKube, tmp_path: Path
) -> None:
    plan = plan_json(
        ("a", ["create"]), ("b", ["create"]), ("g", ["delete", "create"]), ("n", ["no-op"])
    )
    expected = {"create": 2, "update": 0, "replace": 1, "delete": 0}
    for op, extra in (("apply", {}), ("plan", {"CAPTF_PLAN_SECRET": "c-plan-2"}), ("drift", {})):
        tofu = ScriptedTofu(tmp_path, plan=plan, new_state=tfstate(1))
        result = await execute(environ(op, **extra), kube, tofu, tmp_path)
        assert result.changes is not None, op
        body = result.changes.to_json()
        assert {k: body[k] for k in expected} == expected, op
        assert body["addresses"] == {"create": ["a", "b"], "replace": ["g"]}, op


def test_the_result_keeps_counts_and_gives_up_addresses_to_fit() -> None:
    from controller.core.basics.changes import changes_of
    from controller.runner.result import RunnerResult

    many = changes_of(
        (f"module.m.terraform_data.r[{'x' * 60}{i}]", a)
        for a in ("create", "delete")
        for i in range(40)
    )
    result = RunnerResult(outcome=Outcome.SUCCESS, message="m" * 3000, changes=many)
    body = orjson.loads(result.to_json())
    assert len(result.to_json().encode()) <= 4096
    assert (body["changes"]["create"], body["changes"]["delete"]) == (40, 40)
    shown = body["changes"].get("addresses", {})
    # The first of each action stays longest.
    assert shown["create"][0].endswith("0]")
    assert shown["delete"][0].endswith("0]")
