"""The module linter's rules over module facts: each rule passing and failing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.contract.roles import CLUSTER, MACHINE, MACHINEPOOL, RoleContract
from controller.lint.module_facts import (
    ModuleFacts,
    Output,
    ProviderArgument,
    Variable,
    Where,
)
from controller.lint.rules import RULES, Finding, Severity, has_errors, lint

AT = Where("main.tf", 3)


def conforming(contract: RoleContract) -> ModuleFacts:
    """A module that declares exactly its role's contract, as the contract asks."""
    variables = tuple(
        Variable(
            spec.name,
            Where("variables.tf", index + 1),
            type=spec.type,
            has_default=spec.nullable,
            sensitive=spec.sensitive,
        )
        for index, spec in enumerate(contract.inputs)
    )
    outputs = tuple(Output(name, Where("outputs.tf", 1)) for name in contract.outputs)
    return ModuleFacts(variables=variables, outputs=outputs, referenced=frozenset({"captf_tags"}))


def without(module: ModuleFacts, name: str) -> ModuleFacts:
    return replace(
        module,
        variables=tuple(v for v in module.variables if v.name != name),
        outputs=tuple(o for o in module.outputs if o.name != name),
    )


def changed(module: ModuleFacts, name: str, **fields: object) -> ModuleFacts:
    variables = tuple(
        replace(v, **fields) if v.name == name else v  # type: ignore[arg-type]
        for v in module.variables
    )
    return replace(module, variables=variables)


def plus(module: ModuleFacts, *variables: Variable) -> ModuleFacts:
    return replace(module, variables=module.variables + variables)


def rules(findings: list[Finding]) -> list[tuple[str, Severity]]:
    return [(finding.rule, finding.severity) for finding in findings]


@pytest.mark.parametrize("contract", [CLUSTER, MACHINE, MACHINEPOOL], ids=lambda c: c.role.value)
def test_a_conforming_module_is_clean(contract: RoleContract) -> None:
    assert lint(conforming(contract), contract) == []


E, W = Severity.ERROR, Severity.WARNING
M = conforming(MACHINE)
C = conforming(CLUSTER)
P = conforming(MACHINEPOOL)

CASES: list[tuple[str, ModuleFacts, RoleContract, list[tuple[str, Severity]]]] = [
    ("input missing", without(M, "machine_name"), MACHINE, [("input-required", E)]),
    ("tags missing", without(M, "captf_tags"), MACHINE, [("input-required", E)]),
    ("type wrong", changed(P, "replicas", type="string"), MACHINEPOOL, [("input-type", E)]),
    ("type any", changed(P, "autoscaling", type="any"), MACHINEPOOL, []),
    (
        "object lacks an attribute",
        changed(M, "captf_object", type="object({kind=string, name=string, uid=string})"),
        MACHINE,
        [("input-type", E)],
    ),
    (
        "object with optional attributes",
        changed(
            C,
            "cluster_network",
            type="object({pods=optional(list(string), []), extra=optional(string)})",
        ),
        CLUSTER,
        [],
    ),
    ("no type", changed(M, "machine_name", type=None), MACHINE, [("input-type", W)]),
    ("unreadable type", changed(M, "machine_name", type="strng"), MACHINE, [("input-type", W)]),
    (
        "default on non-null",
        changed(M, "machine_name", has_default=True),
        MACHINE,
        [("input-default", W)],
    ),
    ("default on nullable", changed(M, "failure_domain", has_default=True), MACHINE, []),
    (
        "bootstrap not sensitive",
        changed(M, "bootstrap_data", sensitive=False),
        MACHINE,
        [("input-sensitive", W)],
    ),
    (
        "reserved name",
        plus(M, Variable("captf_extra", AT, type="string", has_default=True)),
        MACHINE,
        [("input-reserved", E)],
    ),
    (
        "cluster outputs on a cluster, defaulted",
        plus(C, Variable("captf_cluster_outputs", AT, type="any", has_default=True)),
        CLUSTER,
        [],
    ),
    (
        "cluster outputs on a cluster, required",
        plus(C, Variable("captf_cluster_outputs", AT, type="any")),
        CLUSTER,
        [("input-reserved", E)],
    ),
    (
        "meta-argument",
        plus(M, Variable("count", AT, type="number", has_default=True)),
        MACHINE,
        [("input-meta-argument", E)],
    ),
    (
        "user variable with a default",
        plus(M, Variable("size", AT, type="string", has_default=True)),
        MACHINE,
        [],
    ),
    (
        "user variable without a default",
        plus(M, Variable("size", AT, type="string")),
        MACHINE,
        [("input-user-variable-default", W)],
    ),
    (
        "another role's input is a user variable here",
        plus(C, Variable("machine_name", AT, type="string")),
        CLUSTER,
        [("input-user-variable-default", W)],
    ),
    (
        "tags never read",
        replace(M, referenced=frozenset({"machine_name"})),
        MACHINE,
        [("input-tags-unused", W)],
    ),
    ("output missing", without(P, "provider_id_list"), MACHINEPOOL, [("output-required", E)]),
    ("health missing", without(C, "health"), CLUSTER, [("output-required", E)]),
    (
        "reserved output",
        replace(M, outputs=(*M.outputs, Output("captf_status", AT))),
        MACHINE,
        [("output-reserved", W)],
    ),
    ("backend", replace(M, backends=(AT,)), MACHINE, [("module-backend", E)]),
    ("cloud", replace(M, clouds=(AT,)), MACHINE, [("module-cloud", E)]),
    (
        "credential literal",
        replace(M, provider_arguments=(ProviderArgument("aws", "Secret_Key", True, AT),)),
        MACHINE,
        [("module-provider-config", W)],
    ),
    (
        "credential from a reference",
        replace(M, provider_arguments=(ProviderArgument("aws", "secret_key", False, AT),)),
        MACHINE,
        [],
    ),
    (
        "other literal",
        replace(M, provider_arguments=(ProviderArgument("aws", "region", True, AT),)),
        MACHINE,
        [],
    ),
]


@pytest.mark.parametrize(
    ("module", "contract", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_rule(
    module: ModuleFacts, contract: RoleContract, expected: list[tuple[str, Severity]]
) -> None:
    assert rules(lint(module, contract)) == expected


def test_every_rule_is_exercised_and_severities_match() -> None:
    seen = {rule for *_, expected in CASES for rule, _ in expected}
    assert seen == set(RULES)
    for *_, expected in CASES:
        for rule, severity in expected:
            assert rule == "input-type" or RULES[rule].severity is severity


def test_findings_are_ordered_module_wide_first_then_by_place() -> None:
    module = replace(
        without(M, "machine_name"),
        backends=(Where("z.tf", 1),),
        clouds=(Where("a.tf", 9),),
    )
    places = [(f.where.file, f.where.line) if f.where else None for f in lint(module, MACHINE)]
    assert places == [None, ("a.tf", 9), ("z.tf", 1)]


def test_errors_fail_and_warnings_fail_only_when_strict() -> None:
    warning = [Finding("input-default", W, "x")]
    error = [Finding("input-required", E, "x")]
    assert not has_errors([])
    assert not has_errors(warning)
    assert has_errors(warning, strict=True)
    assert has_errors(error)
