"""The roles' names and the refusal of user variables that would collide with them."""

from __future__ import annotations

import pytest

from controller.core.contract import variables
from controller.core.contract.roles import (
    CONTRACT_VERSION,
    META_ARGUMENTS,
    Role,
    UnknownKind,
    contract_for_kind,
    contract_of,
    is_reserved,
)


def test_the_contract_version_is_v1alpha1() -> None:
    assert CONTRACT_VERSION == "v1alpha1"


@pytest.mark.parametrize(
    ("kind", "role"),
    [
        ("TerraformCluster", Role.CLUSTER),
        ("TerraformMachine", Role.MACHINE),
        ("TerraformMachinePool", Role.MACHINEPOOL),
    ],
)
def test_each_kind_plays_one_role(kind: str, role: Role) -> None:
    assert contract_for_kind(kind).role is role
    assert contract_of(role).kind == kind


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(UnknownKind, match="TerraformWidget"):
        contract_for_kind("TerraformWidget")


COMMON = {"captf_contract", "captf_cluster", "captf_object", "captf_tags"}


@pytest.mark.parametrize(
    ("role", "inputs", "outputs"),
    [
        (
            Role.CLUSTER,
            COMMON
            | {
                "control_plane_endpoint",
                "kubernetes_version",
                "control_plane_initialized",
                "cluster_network",
            },
            ("control_plane_endpoint", "failure_domains", "exports", "health"),
        ),
        (
            Role.MACHINE,
            COMMON
            | {
                "captf_cluster_outputs",
                "machine_name",
                "bootstrap_data",
                "bootstrap_format",
                "failure_domain",
                "kubernetes_version",
                "control_plane",
            },
            ("provider_id", "addresses", "failure_domain", "interruptible", "health"),
        ),
        (
            Role.MACHINEPOOL,
            COMMON
            | {
                "captf_cluster_outputs",
                "machinepool_name",
                "replicas",
                "bootstrap_data",
                "bootstrap_format",
                "failure_domains",
                "cluster_failure_domains",
                "kubernetes_version",
                "node_labels",
                "autoscaling",
            },
            ("provider_id", "provider_id_list", "replicas", "instances", "health"),
        ),
    ],
)
def test_the_names_of_each_role(role: Role, inputs: set[str], outputs: tuple[str, ...]) -> None:
    assert contract_of(role).input_names == inputs
    assert contract_of(role).outputs == outputs


def test_only_bootstrap_data_is_a_sensitive_contract_input() -> None:
    for role in Role:
        sensitive = {spec.name for spec in contract_of(role).inputs if spec.sensitive}
        assert sensitive == (set() if role is Role.CLUSTER else {"bootstrap_data"})


@pytest.mark.parametrize(
    ("name", "role", "reserved"),
    [
        ("captf_anything", Role.CLUSTER, True),
        ("machine_name", Role.MACHINE, True),
        ("machine_name", Role.CLUSTER, False),
        ("control_plane_initialized", Role.CLUSTER, True),
        ("replicas", Role.MACHINEPOOL, True),
        ("replicas", Role.MACHINE, False),
        ("count", Role.MACHINE, True),
        ("instance_type", Role.MACHINE, False),
    ],
)
def test_reserved_names(name: str, role: Role, reserved: bool) -> None:
    assert is_reserved(name, role) is reserved


@pytest.mark.parametrize(
    ("name", "role", "why"),
    [
        ("captf_region", Role.CLUSTER, "reserved prefix 'captf_'"),
        ("captf_cluster_outputs", Role.CLUSTER, "reserved prefix"),
        ("machine_name", Role.MACHINE, "contract input of the machine role"),
        ("cluster_network", Role.CLUSTER, "contract input of the cluster role"),
        ("node_labels", Role.MACHINEPOOL, "contract input of the machinepool role"),
        ("1st", Role.MACHINE, "not a Terraform identifier"),
        ("has space", Role.MACHINE, "not a Terraform identifier"),
        ("", Role.MACHINE, "not a Terraform identifier"),
        *[(name, Role.MACHINE, "meta-argument") for name in sorted(META_ARGUMENTS)],
    ],
)
def test_a_refused_variable_is_named_with_the_reason(name: str, role: Role, why: str) -> None:
    found = variables.refusals([name], role)
    assert len(found) == 1
    assert found[0].name == name
    assert why in found[0].message
    assert repr(name) in found[0].message


@pytest.mark.parametrize("name", ["instance_type", "_private", "disk-size", "Zone2"])
def test_ordinary_names_pass(name: str) -> None:
    for role in Role:
        assert variables.refusals([name], role) == ()
        variables.check([name], role)


def test_check_names_every_refused_variable_in_order() -> None:
    with pytest.raises(variables.VariablesRefused) as caught:
        variables.check(["zone", "count", "captf_x", "machine_name"], Role.MACHINE)
    assert [r.name for r in caught.value.refusals] == ["captf_x", "count", "machine_name"]
    assert str(caught.value).startswith("user variable 'captf_x' uses the reserved prefix")
