"""The generated root: its variables, its call of the role module, its outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.core.contract import root
from controller.core.contract.roles import Role, contract_of
from controller.core.contract.root import InputsMismatch, render
from controller.core.contract.variables import VariablesRefused


def sample_inputs(role: Role) -> dict[str, Any]:
    """A value for every contract input of the role: only the names matter here."""
    return {spec.name: f"<{spec.name}>" for spec in contract_of(role).inputs}


MACHINE_MAIN = {
    "module": {
        "role": {
            "source": "../module",
            "bootstrap_data": "${var.bootstrap_data}",
            "bootstrap_format": "${var.bootstrap_format}",
            "captf_cluster": "${var.captf_cluster}",
            "captf_cluster_outputs": "${var.captf_cluster_outputs}",
            "captf_contract": "${var.captf_contract}",
            "captf_object": "${var.captf_object}",
            "captf_tags": "${var.captf_tags}",
            "control_plane": "${var.control_plane}",
            "failure_domain": "${var.failure_domain}",
            "instance_type": "${var.instance_type}",
            "kubernetes_version": "${var.kubernetes_version}",
            "machine_name": "${var.machine_name}",
            "password": "${var.password}",
        }
    },
    "output": {
        name: {"value": f"${{module.role.{name}}}", "sensitive": True}
        for name in ("addresses", "failure_domain", "health", "interruptible", "provider_id")
    },
    "variable": {
        "bootstrap_data": {"type": "string", "sensitive": True},
        "bootstrap_format": {"type": "string"},
        "captf_cluster": {"type": "object({name=string, namespace=string})"},
        "captf_cluster_outputs": {"type": "any", "default": None},
        "captf_contract": {"type": "string"},
        "captf_object": {"type": "object({kind=string, name=string, namespace=string})"},
        "captf_tags": {"type": "map(string)"},
        "control_plane": {"type": "bool"},
        "failure_domain": {"type": "string", "default": None},
        "instance_type": {},
        "kubernetes_version": {"type": "string", "default": None},
        "machine_name": {"type": "string"},
        "password": {"sensitive": True},
    },
}


def test_the_machine_root() -> None:
    got = render(
        Role.MACHINE,
        sample_inputs(Role.MACHINE),
        user_variables={"instance_type": "large", "password": "s3cret"},
        secret_variables=frozenset({"password"}),
    )
    assert got.main == MACHINE_MAIN
    assert got.tfvars == {
        **sample_inputs(Role.MACHINE),
        "instance_type": "large",
        "password": "s3cret",
    }
    assert got.sensitive_variables() == {"bootstrap_data", "password"}


def test_a_cluster_root_never_passes_cluster_outputs() -> None:
    got = render(Role.CLUSTER, sample_inputs(Role.CLUSTER))
    assert "captf_cluster_outputs" not in got.main["variable"]
    assert "captf_cluster_outputs" not in got.main["module"]["role"]
    assert "captf_cluster_outputs" not in got.tfvars
    assert sorted(got.main["output"]) == [
        "control_plane_endpoint",
        "exports",
        "failure_domains",
        "health",
    ]
    nullable = {n for n, v in got.main["variable"].items() if "default" in v}
    assert nullable == {"control_plane_endpoint", "kubernetes_version", "cluster_network"}


@pytest.mark.parametrize("role", list(Role))
def test_every_root_forwards_exactly_its_variables(role: Role) -> None:
    got = render(role, sample_inputs(role), user_variables={"zone": "a"})
    call = dict(got.main["module"]["role"])
    assert call.pop("source") == root.MODULE_SOURCE
    assert set(call) == set(got.main["variable"]) == set(got.tfvars)
    assert all(value == f"${{var.{name}}}" for name, value in call.items())
    assert set(got.main["output"]) == set(contract_of(role).outputs)
    assert all(out["sensitive"] is True for out in got.main["output"].values())


def test_the_files_are_canonical_and_deterministic() -> None:
    inputs = sample_inputs(Role.MACHINEPOOL)
    shuffled = dict(reversed(list(inputs.items())))
    first = render(Role.MACHINEPOOL, inputs, user_variables={"b": 1, "a": {"y": 1, "x": 2}})
    second = render(Role.MACHINEPOOL, shuffled, user_variables={"a": {"x": 2, "y": 1}, "b": 1})
    assert first.files() == second.files()
    assert set(first.files()) == {"main.tf.json", "terraform.tfvars.json"}
    text = first.files()["terraform.tfvars.json"]
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


def test_a_null_user_variable_has_a_null_default() -> None:
    got = render(Role.MACHINE, sample_inputs(Role.MACHINE), user_variables={"note": None})
    assert got.main["variable"]["note"] == {"default": None}


def test_a_colliding_user_variable_is_refused_before_rendering() -> None:
    with pytest.raises(VariablesRefused, match="'machine_name' is a contract input"):
        render(Role.MACHINE, sample_inputs(Role.MACHINE), user_variables={"machine_name": "x"})
    with pytest.raises(VariablesRefused, match="'for_each' is a module meta-argument"):
        render(Role.CLUSTER, sample_inputs(Role.CLUSTER), user_variables={"for_each": []})


def test_inputs_that_are_not_the_role_s_are_a_caller_bug() -> None:
    inputs = sample_inputs(Role.CLUSTER)
    inputs.pop("cluster_network")
    inputs["captf_cluster_outputs"] = {}
    with pytest.raises(
        InputsMismatch, match=r"missing \['cluster_network'\].*captf_cluster_outputs"
    ):
        render(Role.CLUSTER, inputs)
