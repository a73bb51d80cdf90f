"""The runner pod's policy fields: which level sets each, the restricted profile under
the security contexts, the shapes refused, and that none of them is an input."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.admission.checks import spec_refusals
from controller.core.basics.names import CLUSTER, MACHINE, POOL
from controller.core.decide.context import read_spec
from controller.core.decide.decision import to_json
from controller.core.decide.settings import JobDefaultsError, job_defaults
from controller.core.decide.snapshot import build
from controller.core.decide.steps import decide
from controller.core.spec.inputs import render
from controller.core.spec.jobpod import (
    DEFAULT_RESOURCES,
    FIELDS,
    RESTRICTED_CONTAINER,
    RESTRICTED_POD,
    PodPolicy,
    PodPolicyError,
    reserved_env,
    resolve,
)
from controller.core.spec.policy import PolicyError, RunnerPolicy, read_policy
from runtime.jsonobj import Json
from tests.builders import NOW, base_objects, capi_cluster, captf, decided, module_configmap

# One value of each field, and another, to tell the levels apart.
VALUES: dict[str, tuple[Any, Any]] = {
    "resources": ({"requests": {"cpu": "1"}}, {"limits": {"memory": "8Gi"}}),
    "imagePullSecrets": ([{"name": "a"}], [{"name": "b"}]),
    "podSecurityContext": ({"runAsUser": 1000}, {"fsGroup": 2000}),
    "securityContext": ({"runAsUser": 1001}, {"runAsGroup": 1001}),
    "nodeSelector": ({"pool": "infra"}, {"pool": "tf"}),
    "tolerations": ([{"key": "a", "operator": "Exists"}], [{"key": "b", "operator": "Exists"}]),
    "affinity": ({"nodeAffinity": {}}, {"podAntiAffinity": {}}),
    "priorityClassName": ("high", "low"),
    "env": (
        [{"name": "HTTPS_PROXY", "value": "http://p:3128"}],
        [{"name": "NO_PROXY", "value": ""}],
    ),
}
ATTRIBUTE = {
    "resources": "resources",
    "imagePullSecrets": "image_pull_secrets",
    "podSecurityContext": "pod_security_context",
    "securityContext": "security_context",
    "nodeSelector": "node_selector",
    "tolerations": "tolerations",
    "affinity": "affinity",
    "priorityClassName": "priority_class_name",
    "env": "env",
}


def test_every_field_has_a_case() -> None:
    assert set(VALUES) == set(FIELDS) == set(ATTRIBUTE)


def test_without_any_field_the_pod_is_restricted_and_has_requests_and_limits() -> None:
    assert resolve({}) == PodPolicy()
    policy = resolve({"image": "captf:dev"})
    assert policy.resources == DEFAULT_RESOURCES
    assert policy.pod_security_context == RESTRICTED_POD
    assert policy.security_context == RESTRICTED_CONTAINER
    assert policy.pod_fields() == {}


def _expected(name: str, value: Any) -> Any:
    """What `resolve` makes of one field's value."""
    policy = resolve({name: value})
    return getattr(policy, ATTRIBUTE[name])


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize(
    ("own", "cluster", "operator", "winner"),
    [
        (0, 1, None, "own"),
        (None, 0, 1, "cluster"),
        (None, None, 1, "operator"),
        (None, None, None, "default"),
        (0, None, 1, "own"),
    ],
)
def test_each_field_comes_whole_from_the_first_level_that_sets_it(
    name: str, own: int | None, cluster: int | None, operator: int | None, winner: str
) -> None:
    def level(index: int | None) -> Json:
        return {} if index is None else {name: VALUES[name][index]}

    got = getattr(
        resolve(level(own), inherited=level(cluster), defaults=level(operator)), ATTRIBUTE[name]
    )
    given_by = {"own": own, "cluster": cluster, "operator": operator}
    if winner == "default":
        assert got == getattr(PodPolicy(), ATTRIBUTE[name])
    else:
        index = given_by[winner]
        assert index is not None
        assert got == _expected(name, VALUES[name][index])


def test_security_contexts_add_to_the_restricted_profile() -> None:
    policy = resolve({"podSecurityContext": {"runAsUser": 1000, "fsGroup": 2000}})
    assert policy.pod_security_context == RESTRICTED_POD | {"runAsUser": 1000, "fsGroup": 2000}
    policy = resolve({"securityContext": {"seccompProfile": {"type": "Localhost"}}})
    assert policy.security_context["allowPrivilegeEscalation"] is False
    assert policy.security_context["seccompProfile"] == {"type": "Localhost"}


@pytest.mark.parametrize(
    ("jobs", "field"),
    [
        ({"resources": {"requests": {"cpu": "lots"}}}, "spec.jobs.resources.requests.cpu"),
        ({"resources": {"requests": {"cpu": True}}}, "spec.jobs.resources.requests.cpu"),
        ({"resources": {"wanted": {}}}, "spec.jobs.resources.wanted"),
        ({"imagePullSecrets": [{"name": "Not_A_Name"}]}, "spec.jobs.imagePullSecrets[0].name"),
        ({"imagePullSecrets": "regcred"}, "spec.jobs.imagePullSecrets"),
        ({"nodeSelector": {"a": 1}}, "spec.jobs.nodeSelector"),
        ({"tolerations": ["x"]}, "spec.jobs.tolerations[0]"),
        ({"affinity": []}, "spec.jobs.affinity"),
        ({"priorityClassName": "High"}, "spec.jobs.priorityClassName"),
        ({"env": [{"name": "A", "valueFrom": {}}]}, "spec.jobs.env[0]"),
        ({"env": [{"name": "1A", "value": ""}]}, "spec.jobs.env[0].name"),
        ({"podSecurityContext": "restricted"}, "spec.jobs.podSecurityContext"),
    ],
)
def test_a_field_of_the_wrong_shape_is_named(jobs: Json, field: str) -> None:
    with pytest.raises(PodPolicyError, match=rf"^{_re(field)} "):
        resolve(jobs)
    with pytest.raises(PolicyError, match=rf"^{_re(field)} "):
        read_policy({"jobs": {"image": "captf:dev", **jobs}})


def _re(text: str) -> str:
    return re.escape(text)


def test_a_cluster_s_field_of_the_wrong_shape_says_it_is_the_cluster_s() -> None:
    with pytest.raises(PodPolicyError, match=_re("the cluster's spec.jobs.nodeSelector")):
        resolve({}, inherited={"nodeSelector": "x"})


@pytest.mark.parametrize(
    ("name", "reserved"),
    [
        ("CAPTF_OP", True),
        ("CAPTF_ANYTHING", True),
        ("TF_VAR_size", True),
        ("TF_LOG", True),
        ("TF_CLI_CONFIG_FILE", True),
        ("KUBERNETES_SERVICE_HOST", True),
        ("PYTHONPATH", True),
        ("LD_PRELOAD", True),
        ("HOME", True),
        ("PATH", True),
        ("TMPDIR", True),
        ("HTTPS_PROXY", False),
        ("no_proxy", False),
        ("AWS_REGION", False),
        ("TFX", False),
    ],
)
def test_reserved_env_names(name: str, reserved: bool) -> None:
    assert (reserved_env(name) is not None) == reserved
    spec: Json = {"jobs": {"image": "captf:dev", "env": [{"name": "OK", "value": ""}]}}
    spec["jobs"]["env"].append({"name": name, "value": "v"})
    refused = spec_refusals(CLUSTER, {"spec": spec})
    assert [r.field for r in refused] == (["spec.jobs.env[1].name"] if reserved else [])
    template = {"spec": {"template": {"spec": spec}}}
    refused = spec_refusals(f"{MACHINE}Template", template)
    assert [r.field for r in refused] == (
        ["spec.template.spec.jobs.env[1].name"] if reserved else []
    )


def test_a_reserved_env_name_stops_the_object_with_invalid_spec() -> None:
    obj = captf(spec={"jobs": {"env": [{"name": "TF_VAR_size", "value": "9"}]}})
    got = to_json(decide(build(obj, base_objects(applied=False)), NOW), verbose=True)
    assert got["reason"] == "InvalidSpec"
    assert "spec.jobs.env[0].name" in got["message"]
    assert "9" not in got["message"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[]", "must be a JSON object"),
        ("{", "is not JSON"),
        ('{"image": "x"}', "not policy fields"),
        ('{"nodeSelector": "x"}', "--job-defaults.nodeSelector"),
        ('{"env": [{"name": "CAPTF_OP", "value": "x"}]}', "--job-defaults.env[0].name"),
        ('{"securityContext": {"privileged": true}}', "--job-defaults.securityContext.privileged"),
    ],
)
def test_job_defaults_are_held_to_the_rules_of_an_object(text: str, problem: str) -> None:
    with pytest.raises(JobDefaultsError, match=_re(problem)):
        job_defaults(text)


def test_job_defaults_read() -> None:
    assert job_defaults("") == {}
    text = '{"tolerations": [{"key": "tf", "operator": "Exists"}], "priorityClassName": "p"}'
    assert job_defaults(text)["priorityClassName"] == "p"


@pytest.mark.parametrize("kind", [MACHINE, POOL])
def test_members_take_their_cluster_s_fields_where_theirs_are_unset(kind: str) -> None:
    cluster = captf(CLUSTER, "c1", spec={"jobs": {"nodeSelector": {"pool": "infra"}}})
    cluster["spec"]["jobs"]["priorityClassName"] = "infra"
    member = captf(kind, "m1", spec={"jobs": {"priorityClassName": "own"}})
    runner = RunnerPolicy(images=("*",), service_accounts=("*",), pod_defaults={"env": []})
    others = [capi_cluster("c1"), cluster, module_configmap("m1-module")]
    policy = read_spec(build(member, others), runner).policy
    assert policy is not None
    assert policy.pod.node_selector == {"pool": "infra"}
    assert policy.pod.priority_class_name == "own"
    # Its cluster not known (yet): the operator's defaults.
    alone = read_spec(build(member, [module_configmap("m1-module")]), runner).policy
    assert alone is not None
    assert alone.pod.node_selector == {}


def test_a_cluster_takes_nothing_from_another_cluster() -> None:
    other = captf(CLUSTER, "c2", spec={"jobs": {"nodeSelector": {"pool": "infra"}}})
    policy = read_spec(build(captf(), [*base_objects(), other]), RunnerPolicy()).policy
    assert policy is not None
    assert policy.pod.node_selector == {}


_FIELD_VALUES = st.fixed_dictionaries(
    {},
    optional={name: st.sampled_from(values) for name, values in VALUES.items()},
)


@given(_FIELD_VALUES)
def test_no_policy_field_is_an_input(fields: Json) -> None:
    """The inputs hash, and so what an apply is due for, never sees a policy field."""
    plain = captf()
    shaped = captf(spec={"jobs": fields})
    cm = {"c1-module": module_configmap("c1-module")}
    assert render(shaped["spec"], cm, {}).hash == render(plain["spec"], cm, {}).hash


@pytest.mark.parametrize(
    "change",
    [
        {"resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
        {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "tf"}]},
        {"nodeSelector": {"pool": "infra"}},
        {"env": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}]},
    ],
)
def test_an_applied_object_whose_pod_policy_changes_applies_nothing(change: Json) -> None:
    applied = base_objects()
    assert decided(captf(), applied)["action"] == "idle"
    assert decided(captf(spec={"jobs": change}), applied)["action"] == "idle"
