"""TerraformClusterIdentity as the core reads it: allowedNamespaces, required keys, the
reference a machine or pool inherits, the verdict, and who uses an identity."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from controller.core.basics.names import CLUSTER, IDENTITY, MACHINE, POOL, IdentityReason
from controller.core.spec.identity import (
    IdentityRef,
    IdentityView,
    credentials_secret,
    identity_in_use,
    identity_ref_of,
    namespace_allowed,
    own_identity_ref,
    required_keys,
    selector_matches,
    verdict_of,
)
from runtime.jsonobj import Json
from tests.builders import (
    capi_cluster,
    captf,
)

TEAM_A = {"team": "a", "tier": "prod"}


def identity(allowed: Json | None = None, *, required: list[str] | None = None) -> Json:
    spec: Json = {"secretRef": {"name": "aws", "namespace": "captf-system"}}
    if allowed is not None:
        spec["allowedNamespaces"] = allowed
    if required is not None:
        spec["requiredKeys"] = required
    return {"apiVersion": "v1alpha1", "kind": IDENTITY, "metadata": {"name": "aws"}, "spec": spec}


@pytest.mark.parametrize(
    ("allowed", "namespace", "labels", "expected"),
    [
        (None, "team-a", TEAM_A, False),  # unset: none
        ({}, "team-a", TEAM_A, False),  # neither part: none
        ({"list": []}, "team-a", TEAM_A, False),
        ({"list": ["team-a"]}, "team-a", {}, True),
        ({"list": ["team-a"]}, "team-b", {}, False),
        ({"selector": {}}, "anything", {}, True),  # an empty selector: all
        ({"selector": {"matchLabels": {"team": "a"}}}, "x", TEAM_A, True),
        ({"selector": {"matchLabels": {"team": "a"}}}, "x", {"team": "b"}, False),
        ({"selector": {"matchLabels": {"team": "a"}}}, "x", {}, False),
        ({"list": ["team-b"], "selector": {"matchLabels": {"team": "a"}}}, "team-b", {}, True),
        ({"list": ["team-b"], "selector": {"matchLabels": {"team": "a"}}}, "x", TEAM_A, True),
    ],
)
def test_allowed_namespaces(
    allowed: Json | None, namespace: str, labels: dict[str, str], expected: bool
) -> None:
    assert namespace_allowed(identity(allowed), namespace, labels) is expected


def _expr(op: str, *values: str) -> Json:
    return {"matchExpressions": [{"key": "team", "operator": op, "values": list(values)}]}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (_expr("In", "a", "b"), {"team": "b"}, True),
        (_expr("In", "a"), {"team": "c"}, False),
        (_expr("In", "a"), {}, False),
        (_expr("NotIn", "a"), {"team": "c"}, True),
        (_expr("NotIn", "a"), {}, True),
        (_expr("NotIn", "a"), {"team": "a"}, False),
        (_expr("Exists"), {"team": ""}, True),
        (_expr("Exists"), {}, False),
        (_expr("DoesNotExist"), {}, True),
        (_expr("DoesNotExist"), {"team": "a"}, False),
        (_expr("Gt", "1"), {"team": "2"}, False),  # not a label selector operator
        (_expr("In", "a") | {"matchLabels": {"tier": "prod"}}, TEAM_A, True),
        (_expr("In", "a") | {"matchLabels": {"tier": "dev"}}, TEAM_A, False),
    ],
)
def test_label_selector(selector: Json, labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


def test_required_keys_are_the_identity_s_list() -> None:
    assert required_keys(identity(required=["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])) == {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    }
    assert required_keys(identity()) == frozenset()


ALL = {"list": ["team-a"]}
KEYS = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"})


@pytest.mark.parametrize(
    ("ref", "view", "local", "reason"),
    [
        (IdentityRef(IDENTITY, "aws"), IdentityView(), (), IdentityReason.IDENTITY_NOT_FOUND),
        (
            IdentityRef(IDENTITY, "aws"),
            IdentityView(identity({"list": ["team-b"]}), KEYS),
            (),
            IdentityReason.NAMESPACE_NOT_ALLOWED,
        ),
        (
            IdentityRef(IDENTITY, "aws"),
            IdentityView(identity(None), KEYS),
            (),
            IdentityReason.NAMESPACE_NOT_ALLOWED,
        ),
        (
            IdentityRef(IDENTITY, "aws"),
            IdentityView(identity(ALL), None),
            (),
            IdentityReason.SECRET_MISSING,
        ),
        (
            IdentityRef(IDENTITY, "aws"),
            IdentityView(identity(ALL, required=["AWS_SESSION_TOKEN"]), KEYS),
            (),
            IdentityReason.SECRET_KEYS_MISSING,
        ),
        (
            IdentityRef(IDENTITY, "aws"),
            IdentityView(identity(ALL, required=sorted(KEYS)), KEYS),
            (),
            IdentityReason.ALLOWED,
        ),
        (
            IdentityRef(IDENTITY, "aws"),
            IdentityView(
                identity({"selector": {"matchLabels": {"team": "a"}}}),
                KEYS,
                MappingProxyType(TEAM_A),
            ),
            (),
            IdentityReason.ALLOWED,
        ),
        (IdentityRef("Secret", "creds"), IdentityView(), ("creds",), IdentityReason.ALLOWED),
        (IdentityRef("Secret", "creds"), IdentityView(), (), IdentityReason.SECRET_MISSING),
    ],
)
def test_verdict(
    ref: IdentityRef, view: IdentityView, local: tuple[str, ...], reason: IdentityReason
) -> None:
    verdict = verdict_of(ref, view, "team-a", local)
    assert verdict.reason == reason
    assert verdict.allowed is (reason == IdentityReason.ALLOWED)


def test_a_missing_key_is_named_and_no_value_is() -> None:
    view = IdentityView(identity(ALL, required=["TOKEN", "REGION"]), frozenset({"REGION"}))
    verdict = verdict_of(IdentityRef(IDENTITY, "aws"), view, "team-a", ())
    assert verdict.message.endswith("lacks the required keys TOKEN")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"identityRef": {"kind": IDENTITY, "name": "aws"}}, IdentityRef(IDENTITY, "aws")),
        ({"identityRef": {"kind": "Secret", "name": "mine"}}, IdentityRef("Secret", "mine")),
        ({"identityRef": {"kind": "Secret", "name": "creds"}}, IdentityRef("Secret", "creds")),
        ({}, None),
    ],
)
def test_own_reference(spec: Json, expected: IdentityRef | None) -> None:
    assert own_identity_ref(spec) == expected


ON_AWS = {"identityRef": {"kind": IDENTITY, "name": "aws"}}
NO_REF = {"identityRef": None}


@pytest.mark.parametrize(
    ("member_spec", "cluster_spec", "expected"),
    [
        (NO_REF, ON_AWS, IdentityRef(IDENTITY, "aws")),  # inherits the cluster's
        ({"identityRef": {"kind": "Secret", "name": "own"}}, ON_AWS, IdentityRef("Secret", "own")),
        (
            {"identityRef": {"kind": IDENTITY, "name": "gcp"}},
            ON_AWS,
            IdentityRef(IDENTITY, "gcp"),
        ),
        (NO_REF, NO_REF, None),
        (NO_REF, None, None),  # the cluster is not known yet
    ],
)
@pytest.mark.parametrize("kind", [MACHINE, POOL])
def test_members_inherit_their_cluster_s_reference(
    kind: str, member_spec: Json, cluster_spec: Json | None, expected: IdentityRef | None
) -> None:
    member = captf(kind, "m1", spec=member_spec)
    related: dict[tuple[str, str], Json] = {("Cluster", "c1"): capi_cluster("c1")}
    if cluster_spec is not None:
        related[(CLUSTER, "c1")] = captf(CLUSTER, "c1", spec=cluster_spec)
    assert identity_ref_of(member, related) == expected


def test_a_cluster_never_inherits() -> None:
    assert identity_ref_of(captf(CLUSTER, "c1", spec=NO_REF), {}) is None


def test_the_runner_s_secret_is_the_mirror_or_the_named_one() -> None:
    assert credentials_secret(IdentityRef(IDENTITY, "aws")) == "captf-creds-aws"
    assert credentials_secret(IdentityRef("Secret", "creds")) == "creds"
    assert credentials_secret(None) == ""


def test_identity_in_use_lists_objects_and_templates_that_name_it() -> None:
    template: Json = {
        "kind": "TerraformMachineTemplate",
        "metadata": {"namespace": "team-a", "name": "t1"},
        "spec": {"template": {"spec": {"identityRef": {"kind": IDENTITY, "name": "aws"}}}},
    }
    objects = [
        captf(CLUSTER, "c1", spec=ON_AWS),
        captf(CLUSTER, "c2", spec={"identityRef": {"kind": IDENTITY, "name": "gcp"}}),
        captf(CLUSTER, "c3"),  # its own Secret
        captf(MACHINE, "m1", spec=NO_REF),  # inherits: its cluster is listed
        template,
    ]
    assert identity_in_use("aws", objects) == [
        "TerraformCluster default/c1",
        "TerraformMachineTemplate team-a/t1",
    ]
    assert identity_in_use("azure", objects) == []
