"""The admission checks, as tables: each row a spec and the fields it is refused on."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.admission import images, immutable, reserved, security
from controller.core.admission.checks import spec_refusals, update_refusals
from controller.core.admission.identity import (
    SecretAccess,
    identity_refusals,
    secret_to_review,
)
from controller.core.contract.roles import Role
from runtime.jsonobj import Json

DIGEST = "sha256:" + "a" * 64


def fields(refusals: list[Any]) -> list[str]:
    return [r.field for r in refusals]


@pytest.mark.parametrize(
    ("reference", "valid"),
    [
        ("registry.example/team/module:v1", True),
        ("127.0.0.1:5000/mod@" + DIGEST, True),
        ("localhost:5000/a/b:1.0-rc.1@" + DIGEST, True),
        ("ubuntu", True),
        ("library/ubuntu:22.04", True),
        ("Registry.Example/team/mod:v1", True),  # a host may have capitals
        ("registry.example/Team/mod:v1", False),  # a path may not
        ("registry.example/mod:", False),
        ("registry.example/mod:-x", False),
        ("registry.example//mod", False),
        ("registry.example/mod@sha256:abc", False),
        ("registry.example/mod@sha256:" + "A" * 64, False),
        ("registry.example/mod@sha512:" + "a" * 64, False),
        ("registry.example/mod:" + "t" * 129, False),
        ("https://registry.example/mod", False),
        ("registry.example/mod with space", False),
        ("", False),
        ("a/" * 130 + "b", False),  # a name longer than 255 characters
    ],
)
def test_image_reference_syntax(reference: str, valid: bool) -> None:
    problem = images.reference_problem(reference)
    assert (problem is None) == valid, problem
    if problem is not None and reference:
        assert reference not in problem  # the rule, never the value


@pytest.mark.parametrize(
    ("variables", "from_keys", "image", "refused"),
    [
        ({"size": 3}, [], False, []),
        ({"captf_x": 1}, [], False, ["spec.variables.captf_x"]),
        ({"count": 1}, [], False, ["spec.variables.count"]),
        # A contract input is refused for a module image (always a role module) ...
        ({"machine_name": "m"}, [], True, ["spec.variables.machine_name"]),
        # ... and left to the reconcile for a ConfigMap's module, which may be its own root.
        ({"machine_name": "m"}, [], False, []),
        ({"not an identifier": 1}, [], True, ["spec.variables.not an identifier"]),
        ({}, ["captf_tags"], False, ["spec.variablesFrom[0].secretRef.key"]),
        ({}, ["region"], True, []),
    ],
)
def test_reserved_variable_names(
    variables: Json, from_keys: list[str], image: bool, refused: list[str]
) -> None:
    source = {"image": "r.example/m:v1"} if image else {"configMapRef": {"name": "m"}}
    spec: Json = {
        "source": source,
        "variables": variables,
        "variablesFrom": [{"secretRef": {"name": "s", "key": k}} for k in from_keys],
    }
    assert fields(reserved.refusals(spec, Role.MACHINE)) == refused


@pytest.mark.parametrize(
    ("jobs", "refused"),
    [
        ({"image": "captf:dev", "activeDeadlineSeconds": 600}, []),
        ({"securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True}}, []),
        ({"securityContext": {"privileged": True}}, ["securityContext.privileged"]),
        (
            {"securityContext": {"allowPrivilegeEscalation": True}},
            ["securityContext.allowPrivilegeEscalation"],
        ),
        ({"podSecurityContext": {"runAsNonRoot": False}}, ["podSecurityContext.runAsNonRoot"]),
        ({"podSecurityContext": {"runAsUser": 0}}, ["podSecurityContext.runAsUser"]),
        ({"podSecurityContext": {"runAsUser": 1000}}, []),
        (
            {"securityContext": {"readOnlyRootFilesystem": False}},
            ["securityContext.readOnlyRootFilesystem"],
        ),
        (
            {"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}},
            ["securityContext.capabilities.add"],
        ),
        ({"securityContext": {"capabilities": {"drop": ["ALL"]}}}, []),
        # Given, capabilities replace the runner's drop of ALL.
        (
            {"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}},
            ["securityContext.capabilities.drop"],
        ),
        (
            {"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}},
            ["securityContext.capabilities.add", "securityContext.capabilities.drop"],
        ),
        (
            {"podSecurityContext": {"appArmorProfile": {"type": "Unconfined"}}},
            ["podSecurityContext.appArmorProfile.type"],
        ),
        ({"podSecurityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}, []),
        (
            {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
            ["securityContext.seccompProfile.type"],
        ),
        ({"securityContext": {"procMount": "Unmasked"}}, ["securityContext.procMount"]),
        ({"hostNetwork": True, "hostPID": False}, ["hostNetwork"]),
        (
            {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/"}}]},
            ["volumes[1].hostPath"],
        ),
    ],
)
def test_security_context_weakening(jobs: Json, refused: list[str]) -> None:
    assert fields(security.refusals({"jobs": jobs})) == [f"spec.jobs.{f}" for f in refused]


def test_template_spec_is_immutable_by_value() -> None:
    old: Json = {"spec": {"template": {"spec": {"variables": {"a": 1}}}}}
    same: Json = {
        "spec": {"template": {"spec": {"variables": {"a": 1}}}},
        "metadata": {"labels": {"x": "y"}},
    }
    changed: Json = {"spec": {"template": {"spec": {"variables": {"a": 2}}}}}
    assert update_refusals("TerraformMachineTemplate", old, same) == []
    [refusal] = update_refusals("TerraformMachineTemplate", old, changed)
    assert refusal.field == "spec.template"
    assert "TerraformMachineTemplate spec.template is immutable" in refusal.rule
    # The scale-from-zero fields beside the template make no machine: they may change.
    sized: Json = {"spec": {"template": old["spec"]["template"], "capacity": {"cpu": "4"}}}
    assert update_refusals("TerraformMachineTemplate", old, sized) == []


DRY_RUN_NOTE: Json = {"annotations": {"topology.cluster.x-k8s.io/dry-run": ""}}


@pytest.mark.parametrize(
    ("dry_run", "metadata", "refused"),
    [
        (True, DRY_RUN_NOTE, False),  # the topology controller's comparison
        (True, {}, True),  # someone else's dry run
        (False, DRY_RUN_NOTE, True),  # the annotation alone is no dry run
        (False, {}, True),
    ],
)
def test_only_the_topology_controllers_dry_run_may_change_a_template(
    dry_run: bool, metadata: Json, refused: bool
) -> None:
    old: Json = {"spec": {"template": {"spec": {"source": {"image": "r/m:1"}}}}}
    new: Json = {
        "metadata": metadata,
        "spec": {"template": {"spec": {"source": {"image": "r/m:2"}}}},
    }
    for kind in ("TerraformClusterTemplate", "TerraformMachineTemplate"):
        found = update_refusals(kind, old, new, dry_run=dry_run)
        assert bool(found) is refused, kind
    # Not for the objects themselves: a machine's inputs stay immutable in a dry run too.
    machine_old: Json = {"spec": {"source": {"image": "r/m:1"}}}
    machine_new: Json = {"metadata": metadata, "spec": {"source": {"image": "r/m:2"}}}
    assert update_refusals("TerraformMachine", machine_old, machine_new, dry_run=dry_run)


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"jobs": {"image": "other"}, "suspend": True}, []),
        ({"variables": {"a": 2}}, ["spec.variables"]),
        ({"variablesFrom": [{"secretRef": {"name": "s"}}]}, ["spec.variablesFrom"]),
        ({"source": {"configMapRef": {"name": "other"}}}, ["spec.source"]),
        ({"identityRef": {"kind": "Secret", "name": "other"}}, ["spec.identityRef"]),
        ({"providerID": "p2"}, ["spec.providerID"]),
    ],
)
def test_machine_inputs_are_immutable(change: Json, refused: list[str]) -> None:
    old: Json = {
        "spec": {
            "source": {"configMapRef": {"name": "m"}},
            "variables": {"a": 1},
            "providerID": "p1",
        }
    }
    new = {"spec": {**old["spec"], **change}}
    assert fields(immutable.changes("TerraformMachine", old, new)) == refused
    # A cluster takes new inputs at any time.
    assert immutable.changes("TerraformCluster", old, new) == []


def test_a_machine_may_get_its_provider_id_once() -> None:
    old: Json = {"spec": {"variables": {}}}
    assert (
        immutable.changes("TerraformMachine", old, {"spec": {"variables": {}, "providerID": "p"}})
        == []
    )


def test_template_checks_look_inside_the_template() -> None:
    template: Json = {
        "kind": "TerraformMachineTemplate",
        "spec": {
            "template": {"spec": {"variables": {"captf_x": 1}, "source": {"image": "bad image"}}}
        },
    }
    assert fields(spec_refusals("TerraformMachineTemplate", template)) == [
        "spec.template.spec.variables.captf_x",
        "spec.template.spec.source.image",
    ]


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        ({"secretRef": {"name": "creds", "namespace": "platform"}}, []),
        ({"secretRef": {"name": "creds"}}, ["spec.secretRef.namespace"]),
        ({}, ["spec.secretRef.name", "spec.secretRef.namespace"]),
        (
            {"secretRef": {"name": "c", "namespace": "p"}, "allowedNamespaces": {"list": "team-a"}},
            ["spec.allowedNamespaces.list"],
        ),
        ({"secretRef": {"name": "c", "namespace": "p"}, "allowedNamespaces": {"selector": {}}}, []),
    ],
)
def test_identity_shape(spec: Json, refused: list[str]) -> None:
    assert fields(identity_refusals({"spec": spec})) == refused


@pytest.mark.parametrize(
    ("kind", "obj", "review"),
    [
        (
            "TerraformCluster",
            {
                "metadata": {"namespace": "team-a"},
                "spec": {"identityRef": {"kind": "Secret", "name": "creds"}},
            },
            SecretAccess("team-a", "creds", "spec.identityRef"),
        ),
        # Using a cluster identity needs its allowedNamespaces, not the right to read its Secret.
        (
            "TerraformCluster",
            {
                "metadata": {"namespace": "team-a"},
                "spec": {"identityRef": {"kind": "TerraformClusterIdentity", "name": "aws"}},
            },
            None,
        ),
        ("TerraformCluster", {"metadata": {"namespace": "team-a"}, "spec": {}}, None),
        (
            "TerraformClusterIdentity",
            {"spec": {"secretRef": {"name": "creds", "namespace": "platform"}}},
            SecretAccess("platform", "creds", "spec.secretRef"),
        ),
    ],
)
def test_which_secret_the_requester_must_read(
    kind: str, obj: Json, review: SecretAccess | None
) -> None:
    spec = obj.get("spec") or {}
    assert secret_to_review(kind, obj, spec) == review


def test_identity_ref_kind_is_checked() -> None:
    obj: Json = {"spec": {"identityRef": {"kind": "ConfigMap", "name": "x"}}}
    assert fields(spec_refusals("TerraformCluster", obj)) == ["spec.identityRef.kind"]


@pytest.mark.parametrize(
    ("plan", "refused"),
    [
        ({"spec": {"approved": False}}, []),
        ({"spec": {"approved": True, "approvedBy": "alice"}}, []),
        ({"spec": {"approved": True}}, ["spec.approvedBy"]),
    ],
)
def test_an_approved_plan_names_its_approver(plan: Json, refused: list[str]) -> None:
    assert fields(spec_refusals("TerraformPlan", plan)) == refused


PLANNED: Json = {
    "target": {"kind": "TerraformCluster", "name": "a", "uid": "1"},
    "inputsHash": "h1",
}


@pytest.mark.parametrize(
    ("before", "after", "refused"),
    [
        ({}, {"approved": True, "approvedBy": "alice"}, []),
        ({"target": {"kind": "TerraformCluster", "name": "b", "uid": "2"}}, {}, ["spec.target"]),
        ({"inputsHash": "h2"}, {}, ["spec.inputsHash"]),
        ({"approved": True, "approvedBy": "alice"}, {"approved": False}, ["spec.approved"]),
    ],
)
def test_a_plan_changes_only_by_its_approval(before: Json, after: Json, refused: list[str]) -> None:
    old: Json = {
        "spec": PLANNED | {k: v for k, v in before.items() if k in ("approved", "approvedBy")}
    }
    new: Json = {"spec": PLANNED | before | after}
    if "approvedBy" in old["spec"] and after.get("approved") is False:
        new["spec"].pop("approvedBy", None)
    assert fields(update_refusals("TerraformPlan", old, new)) == refused
