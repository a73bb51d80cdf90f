"""The checks a module author runs before publishing a role module: its declarations
against the role's contract (roles.py), read from `ModuleFacts`.

Each finding names a rule by a stable id. The ids are those of the public
implementation's linter with the group separator written as `-` (`input/required` is
`input-required`), so a rule reads the same in either; where the public linter splits a
case into a rule of its own (a missing `captf_tags`, a missing `health`), it is the
general rule here. Errors are what breaks a run under the controller; warnings are what
runs but is most likely a mistake."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from controller.core.contract.roles import (
    META_ARGUMENTS,
    RESERVED_PREFIX,
    RoleContract,
)
from controller.lint.module_facts import ModuleFacts, Variable, Where
from controller.lint.typeexpr import TypeSyntaxError, accepts, parse_type


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    # None: the finding is about the module as a whole (something it lacks).
    where: Where | None = None

    def sort_key(self) -> tuple[str, int, str, str]:
        where = self.where or Where("")
        return (where.file, where.line or 0, self.rule, self.message)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    summary: str


def _rules(*rules: Rule) -> dict[str, Rule]:
    return {rule.id: rule for rule in rules}


_E, _W = Severity.ERROR, Severity.WARNING
RULES = _rules(
    Rule("input-required", _E, "a contract input of the role is not declared"),
    Rule("input-type", _E, "a contract input's type does not take what the root passes"),
    Rule("input-default", _W, "a contract input that is never null has a default"),
    Rule("input-sensitive", _W, "bootstrap_data is not declared sensitive"),
    Rule("input-reserved", _E, "a captf_ variable that is not a contract input of the role"),
    Rule("input-meta-argument", _E, "a variable named as a module meta-argument"),
    Rule("input-user-variable-default", _W, "a user variable has no default"),
    Rule("input-tags-unused", _W, "captf_tags is declared but never read"),
    Rule("output-required", _E, "a contract output of the role is not declared"),
    Rule("output-reserved", _W, "an output uses the reserved captf_ prefix"),
    Rule("module-backend", _E, "a terraform block configures a backend"),
    Rule("module-cloud", _E, "a terraform block configures a cloud block"),
    Rule("module-provider-config", _W, "a provider block holds a credential literal"),
)

# Allowed in any role when it has a default: the cluster role never passes it, and a
# module may be written to serve as a cluster and as a machine.
CLUSTER_OUTPUTS = "captf_cluster_outputs"
TAGS = "captf_tags"
BOOTSTRAP_DATA = "bootstrap_data"

# Provider arguments that carry a secret when written out; matched without case. A
# module takes credentials from the Job's identity, never from its source.
CREDENTIAL_ARGUMENTS = frozenset(
    {
        "access_key",
        "secret_key",
        "secret_access_key",
        "session_token",
        "token",
        "access_token",
        "auth_token",
        "bearer_token",
        "api_token",
        "api_key",
        "apikey",
        "password",
        "passphrase",
        "client_secret",
        "client_certificate",
        "client_certificate_password",
        "client_key",
        "private_key",
        "private_key_password",
        "ssh_private_key",
        "secret",
    }
)


def _finding(rule: str, message: str, where: Where | None = None) -> Finding:
    return Finding(rule, RULES[rule].severity, message, where)


Check = Callable[[ModuleFacts, RoleContract], Iterator[Finding]]


def _input_required(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for spec in contract.inputs:
        if module.variable(spec.name) is None:
            yield _finding(
                "input-required",
                f"the role's input {spec.name} ({spec.type}) has no variable declaration",
            )


def _input_type(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for spec in contract.inputs:
        variable = module.variable(spec.name)
        if variable is None:
            continue
        if variable.type is None:
            yield Finding(
                "input-type",
                Severity.WARNING,
                f"variable {spec.name} has no type; the contract passes {spec.type}",
                variable.where,
            )
            continue
        try:
            declared = parse_type(variable.type)
        except TypeSyntaxError as err:
            yield Finding(
                "input-type",
                Severity.WARNING,
                f"variable {spec.name}: cannot read type {variable.type} ({err})",
                variable.where,
            )
            continue
        if not accepts(declared, parse_type(spec.type)):
            yield _finding(
                "input-type",
                f"variable {spec.name}: declared {variable.type}, but the root passes {spec.type}",
                variable.where,
            )


def _input_default(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for spec in contract.inputs:
        variable = module.variable(spec.name)
        if variable and variable.has_default and not spec.nullable:
            yield _finding(
                "input-default",
                f"contract input {spec.name} is never null, so a default only hides a"
                " value the controller failed to pass",
                variable.where,
            )


def _input_sensitive(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    variable = module.variable(BOOTSTRAP_DATA)
    if BOOTSTRAP_DATA in contract.input_names and variable and not variable.sensitive:
        yield _finding(
            "input-sensitive",
            f"variable {BOOTSTRAP_DATA} carries the bootstrap payload: declare it sensitive = true",
            variable.where,
        )


def _input_reserved(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for variable in module.variables:
        name = variable.name
        if not name.startswith(RESERVED_PREFIX) or name in contract.input_names:
            continue
        if name == CLUSTER_OUTPUTS and variable.has_default:
            continue
        yield _finding(
            "input-reserved",
            f"variable {name}: the prefix {RESERVED_PREFIX} is the contract's, and {name}"
            f" is no input of the {contract.role.value} role",
            variable.where,
        )


def _input_meta_argument(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for variable in module.variables:
        if variable.name in META_ARGUMENTS:
            yield _finding(
                "input-meta-argument",
                f"variable {variable.name} is a module meta-argument: the root could not pass it",
                variable.where,
            )


def _is_user_variable(variable: Variable, contract: RoleContract) -> bool:
    name = variable.name
    return not (
        name in contract.input_names or name.startswith(RESERVED_PREFIX) or name in META_ARGUMENTS
    )


def _input_user_variable_default(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for variable in module.variables:
        if _is_user_variable(variable, contract) and not variable.has_default:
            yield _finding(
                "input-user-variable-default",
                f"user variable {variable.name} has no default: an object that leaves it"
                " unset cannot plan",
                variable.where,
            )


def _input_tags_unused(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    variable = module.variable(TAGS)
    if variable and TAGS not in module.referenced:
        yield _finding(
            "input-tags-unused",
            f"variable {TAGS} is never read: tag every resource that takes tags with it",
            variable.where,
        )


def _output_required(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    declared = {output.name for output in module.outputs}
    for name in contract.outputs:
        if name not in declared:
            yield _finding("output-required", f"the role's output {name} is not declared")


def _output_reserved(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for output in module.outputs:
        if output.name.startswith(RESERVED_PREFIX):
            yield _finding(
                "output-reserved",
                f"output {output.name} uses the prefix {RESERVED_PREFIX}, kept for the contract",
                output.where,
            )


def _module_backend(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for where in module.backends:
        yield _finding("module-backend", "a backend block: the controller owns the state", where)


def _module_cloud(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for where in module.clouds:
        yield _finding("module-cloud", "a cloud block: the controller owns the state", where)


def _module_provider_config(module: ModuleFacts, contract: RoleContract) -> Iterator[Finding]:
    for argument in module.provider_arguments:
        if argument.literal and argument.name.lower() in CREDENTIAL_ARGUMENTS:
            yield _finding(
                "module-provider-config",
                f"provider {argument.provider} sets {argument.name} to a literal: take"
                " credentials from the identity the run is given",
                argument.where,
            )


CHECKS: tuple[Check, ...] = (
    _input_required,
    _input_type,
    _input_default,
    _input_sensitive,
    _input_reserved,
    _input_meta_argument,
    _input_user_variable_default,
    _input_tags_unused,
    _output_required,
    _output_reserved,
    _module_backend,
    _module_cloud,
    _module_provider_config,
)


def lint(module: ModuleFacts, contract: RoleContract) -> list[Finding]:
    """Every finding for the module against the role's contract, module-wide ones first,
    then by file, line and rule, so equal modules give equal reports."""
    found = [finding for check in CHECKS for finding in check(module, contract)]
    return sorted(found, key=Finding.sort_key)


def has_errors(findings: list[Finding], *, strict: bool = False) -> bool:
    """Whether the findings fail the module: any error, or under `strict` any warning."""
    return any(strict or finding.severity is Severity.ERROR for finding in findings)
