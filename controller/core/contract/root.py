"""The generated root: the module Terraform runs, which calls the role module.

Layout (a contract with the runner): the root in a directory `root/`, the role module
unchanged in its sibling `module/`, so the call's source is `../module`, a local path
that `init` never fetches. The root holds two files:

- `main.tf.json`: one variable per contract input and per user variable, one
  `module "role"` block forwarding each by name and nothing else, and one output per
  contract output of the role, `module.role.<name>`, always sensitive (a module may mark
  any output sensitive; a non-sensitive root output of it fails the plan).
- `terraform.tfvars.json`: the values, auto-loaded by Terraform and OpenTofu.

No backend: the runner supplies it. Both files are canonical JSON (sorted keys, fixed
indentation), so equal inputs render equal bytes and the rendering can be hashed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.contract.roles import ContractInput, Role, contract_of
from controller.core.contract.variables import check
from runtime.jsonobj import Json

ROOT_DIR = "root"
MODULE_DIR = "module"
MODULE_NAME = "role"
MODULE_SOURCE = f"../{MODULE_DIR}"
MAIN_FILE = "main.tf.json"
TFVARS_FILE = "terraform.tfvars.json"


class InputsMismatch(ValueError):
    """The contract inputs given are not exactly the role's: a caller's bug."""


@dataclass(frozen=True)
class Root:
    role: Role
    main: Json
    tfvars: Json

    def files(self) -> dict[str, str]:
        """The root directory's files by name."""
        return {MAIN_FILE: canonical_text(self.main), TFVARS_FILE: canonical_text(self.tfvars)}

    def sensitive_variables(self) -> frozenset[str]:
        """The root variables declared sensitive: what a display of the tfvars hides."""
        declared = self.main["variable"]
        return frozenset(name for name, spec in declared.items() if spec.get("sensitive"))


def canonical_text(document: object) -> str:
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def render(
    role: Role,
    inputs: Mapping[str, Any],
    *,
    user_variables: Mapping[str, Any] | None = None,
    secret_variables: frozenset[str] = frozenset(),
) -> Root:
    """The root of a role for these contract inputs and user variables.

    `secret_variables` names the user variables whose values came from Secrets: they are
    declared sensitive. Raises VariablesRefused when a user variable may not be passed,
    and InputsMismatch when `inputs` are not exactly the role's contract inputs."""
    contract = contract_of(role)
    given = set(inputs)
    if given != contract.input_names:
        missing = sorted(contract.input_names - given)
        extra = sorted(given - contract.input_names)
        raise InputsMismatch(f"{role.value} inputs: missing {missing}, unexpected {extra}")
    users = dict(user_variables or {})
    check(users, role)
    variables: Json = {spec.name: _contract_variable(spec) for spec in contract.inputs}
    for name, value in users.items():
        variables[name] = _user_variable(value, sensitive=name in secret_variables)
    call: Json = {"source": MODULE_SOURCE}
    call |= {name: f"${{var.{name}}}" for name in variables}
    outputs = {
        name: {"value": f"${{module.{MODULE_NAME}.{name}}}", "sensitive": True}
        for name in contract.outputs
    }
    main = {"variable": variables, "module": {MODULE_NAME: call}, "output": outputs}
    return Root(role=role, main=_sorted(main), tfvars=_sorted({**inputs, **users}))


def _contract_variable(spec: ContractInput) -> Json:
    declared: Json = {"type": spec.type}
    if spec.nullable:
        declared["default"] = None
    if spec.sensitive:
        declared["sensitive"] = True
    return declared


def _user_variable(value: Any, *, sensitive: bool) -> Json:
    """No type: the module's own declaration converts the value (a number variable takes
    "40" from a ConfigMap). A null value is declared with `default = null`, like a
    nullable contract input."""
    declared: Json = {}
    if value is None:
        declared["default"] = None
    if sensitive:
        declared["sensitive"] = True
    return declared


def _sorted(value: Any) -> Any:
    """The same value with every mapping's keys in sorted order."""
    if isinstance(value, Mapping):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
