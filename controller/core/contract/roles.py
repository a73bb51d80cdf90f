"""The roles of the module contract and the names each one owns.

A role module is a child module: the controller renders the root that calls it, so the
contract's names are the root's variables and outputs. Every name here is part of the
public contract v1alpha1 and may only grow (a rename is a new contract version)."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

CONTRACT_VERSION = "v1alpha1"

# Every controller-injected input starts with this; a user variable never may.
RESERVED_PREFIX = "captf_"

# The arguments of a `module` block that are not inputs: a user variable of one of these
# names would be read by Terraform as the meta-argument, not passed to the module.
META_ARGUMENTS = frozenset(
    {"source", "version", "providers", "count", "for_each", "depends_on", "lifecycle", "locals"}
)


class Role(enum.Enum):
    CLUSTER = "cluster"
    MACHINE = "machine"
    MACHINEPOOL = "machinepool"


@dataclass(frozen=True)
class ContractInput:
    name: str
    # The Terraform type constraint the root declares, in expression syntax.
    type: str
    # May be rendered null: the root declares it with `default = null`, as the public
    # implementation's root does, so a tfvars file without the key still plans.
    nullable: bool = False
    # Declared sensitive in the root (the bootstrap payload can carry private keys).
    sensitive: bool = False


@dataclass(frozen=True)
class RoleContract:
    role: Role
    kind: str
    # In the order the contract pages list them; the root renders them sorted.
    inputs: tuple[ContractInput, ...]
    # Every one must be declared by the module; the root re-exports each.
    outputs: tuple[str, ...]

    @property
    def input_names(self) -> frozenset[str]:
        return frozenset(spec.name for spec in self.inputs)

    def input(self, name: str) -> ContractInput:
        return next(spec for spec in self.inputs if spec.name == name)


_CLUSTER_REF = "object({name=string, namespace=string})"
_OBJECT_REF = "object({kind=string, name=string, namespace=string})"

_COMMON = (
    ContractInput("captf_contract", "string"),
    ContractInput("captf_cluster", _CLUSTER_REF),
    ContractInput("captf_object", _OBJECT_REF),
    ContractInput("captf_tags", "map(string)"),
)
# Machines and pools only: a cluster root never declares it, so a cluster module that
# declares it without a default fails, as the public contract says.
_CLUSTER_OUTPUTS = ContractInput("captf_cluster_outputs", "any", nullable=True)
_BOOTSTRAP = (
    ContractInput("bootstrap_data", "string", sensitive=True),
    ContractInput("bootstrap_format", "string"),
)
_VERSION = ContractInput("kubernetes_version", "string", nullable=True)

CLUSTER = RoleContract(
    role=Role.CLUSTER,
    kind="TerraformCluster",
    inputs=(
        *_COMMON,
        ContractInput(
            "control_plane_endpoint", "object({host=string, port=number})", nullable=True
        ),
        _VERSION,
        ContractInput("control_plane_initialized", "bool"),
        ContractInput(
            "cluster_network",
            "object({pods=list(string), services=list(string),"
            " service_domain=string, api_server_port=number})",
            nullable=True,
        ),
    ),
    outputs=("control_plane_endpoint", "failure_domains", "exports", "health"),
)

MACHINE = RoleContract(
    role=Role.MACHINE,
    kind="TerraformMachine",
    inputs=(
        *_COMMON,
        _CLUSTER_OUTPUTS,
        ContractInput("machine_name", "string"),
        *_BOOTSTRAP,
        ContractInput("failure_domain", "string", nullable=True),
        _VERSION,
        ContractInput("control_plane", "bool"),
    ),
    outputs=("provider_id", "addresses", "failure_domain", "interruptible", "health"),
)

MACHINEPOOL = RoleContract(
    role=Role.MACHINEPOOL,
    kind="TerraformMachinePool",
    inputs=(
        *_COMMON,
        _CLUSTER_OUTPUTS,
        ContractInput("machinepool_name", "string"),
        ContractInput("replicas", "number"),
        *_BOOTSTRAP,
        ContractInput("failure_domains", "list(string)"),
        ContractInput("cluster_failure_domains", "list(string)"),
        _VERSION,
        ContractInput("node_labels", "map(string)"),
        ContractInput("autoscaling", "object({enabled=bool, min=number, max=number})"),
    ),
    outputs=("provider_id", "provider_id_list", "replicas", "instances", "health"),
)

CONTRACTS = {contract.role: contract for contract in (CLUSTER, MACHINE, MACHINEPOOL)}
_BY_KIND = {contract.kind: contract for contract in CONTRACTS.values()}


class UnknownKind(ValueError):
    """A kind that plays no role of the contract."""


def contract_of(role: Role) -> RoleContract:
    return CONTRACTS[role]


def contract_for_kind(kind: str) -> RoleContract:
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise UnknownKind(f"{kind!r} is not one of {', '.join(sorted(_BY_KIND))}") from None


def reserved_names(role: Role) -> frozenset[str]:
    """The names a user variable of this role may not take, besides every `captf_` name:
    the role's contract inputs and the module meta-arguments."""
    return contract_of(role).input_names | META_ARGUMENTS


def is_reserved(name: str, role: Role) -> bool:
    return name.startswith(RESERVED_PREFIX) or name in reserved_names(role)


# A module declares the contract by declaring its version input, as every role module must
# (in HCL, or in JSON syntax as a key of "variable"). `[ \t]*`, not `\s*`, after the line
# start: a `\s*` there would rescan each run of blank lines from every line of it.
_DECLARES_CONTRACT = re.compile(r'(?m)^[ \t]*variable\s+"captf_contract"\s*\{|"captf_contract"\s*:')


def declares_contract(module: Mapping[str, str]) -> bool:
    """Whether a module's files declare the `captf_contract` input: a role module written to
    the contract, which the controller calls from a generated root. A module that does not
    is its own root (the module an object ran before the contract): it gets no contract
    inputs and writes nothing back, so Cluster API never sees it provisioned."""
    return any(
        _DECLARES_CONTRACT.search(text)
        for name, text in module.items()
        if name.endswith((".tf", ".tf.json"))
    )
