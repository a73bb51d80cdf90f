"""The policy set on a Job: an apply's and a plan's carry its rules (CAPTF_POLICIES) and
its hash (captf.io/policy-hash); no other op judges, and carries neither; a set too large
for a Job's environment is sent as one the runner cannot read, which denies."""

from __future__ import annotations

import pytest

from controller.core.basics.names import ANN_POLICY_HASH
from controller.core.decide.decision import Run
from controller.core.plan import jobspec
from controller.core.spec.inputs import render
from controller.core.spec.plan_policies import Action, PolicySet, Rule, Scope, decode
from controller.core.spec.policy import read_policy
from runtime.jsonobj import Json
from tests.builders import module_configmap

SPEC: Json = {"source": {"configMapRef": {"name": "m"}}, "jobs": {"image": "captf:dev"}}
OBJ: Json = {
    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
    "kind": "TerraformCluster",
    "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
    "spec": SPEC,
}


def policies(expression: str = "resource.type == 'x'") -> PolicySet:
    rule = Rule("p", "r", Scope.RESOURCE, Action.DENY, expression, "m")
    return PolicySet((rule,), {"object": {"kind": "TerraformCluster"}, "cluster": {}})


def build(op: str, given: PolicySet | None) -> Json:
    inputs = render(SPEC, {"m": module_configmap("m")}, {})
    run = Run(op=op, reason="NoState", retry=1)
    return jobspec.build_job(
        OBJ, run, inputs=inputs, policy=read_policy(SPEC), seq=1, name="c-x", policies=given
    )


def env_of(job: Json) -> dict[str, str]:
    [container] = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"]}


@pytest.mark.parametrize("op", ["apply", "plan"])
def test_judged_ops_carry_the_set_and_its_hash(op: str) -> None:
    given = policies()
    job = build(op, given)
    assert job["metadata"]["annotations"][ANN_POLICY_HASH] == given.hash
    assert decode(env_of(job)["CAPTF_POLICIES"]) == given


@pytest.mark.parametrize("op", ["refresh", "drift", "destroy"])
def test_other_ops_carry_neither(op: str) -> None:
    job = build(op, policies())
    assert ANN_POLICY_HASH not in job["metadata"]["annotations"]
    assert "CAPTF_POLICIES" not in env_of(job)


def test_no_policy_no_variable() -> None:
    job = build("apply", None)
    assert ANN_POLICY_HASH not in job["metadata"]["annotations"]
    assert "CAPTF_POLICIES" not in env_of(job)


def test_a_set_too_large_for_the_environment_is_not_sent() -> None:
    big = policies("resource.type == '" + "x" * 70_000 + "'")
    assert big.too_large()
    assert env_of(build("apply", big))["CAPTF_POLICIES"] == jobspec.TOO_LARGE


def test_the_hash_moves_with_any_rule_and_with_the_subject() -> None:
    base = policies()
    assert policies("resource.type == 'y'").hash != base.hash
    relabelled = PolicySet(base.rules, base.subject | {"object": {"labels": {"tier": "prod"}}})
    assert relabelled.hash != base.hash
    assert policies().hash == base.hash
