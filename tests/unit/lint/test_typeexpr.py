"""Type constraints read from their text, and which declared types take a contract's."""

from __future__ import annotations

import pytest

from controller.core.contract.roles import CONTRACTS
from controller.lint.typeexpr import TypeExpr, TypeSyntaxError, accepts, parse_type


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("string", "string"),
        ("${map(string)}", "map"),
        ("list(object({a = string, b = optional(number, 3)}))", "list"),
        ('object({a = optional(string, "N/A (x)"), b = bool})', "object"),
        ("object({\n  a = string\n  b = number\n})", "object"),
        ("tuple([string, number])", "tuple"),
        ('object({"quoted" = string})', "object"),
    ],
)
def test_parses(text: str, kind: str) -> None:
    assert parse_type(text).kind == kind


def test_optional_attributes_are_marked() -> None:
    parsed = parse_type('object({a = optional(map(string), {"k" = "(v)"}), b = string})')
    assert parsed.optional == frozenset({"a"})
    assert parsed.attributes["a"] == TypeExpr("map", element=TypeExpr("string"))


@pytest.mark.parametrize(
    "text",
    ["", "strin", "list(string", "object({a string})", "map(string) extra", "tuple([string"],
)
def test_refuses(text: str) -> None:
    with pytest.raises(TypeSyntaxError):
        parse_type(text)


def test_every_contract_type_parses() -> None:
    for contract in CONTRACTS.values():
        for spec in contract.inputs:
            parse_type(spec.type)


@pytest.mark.parametrize(
    ("declared", "passed", "expected"),
    [
        ("any", "object({a=string})", True),
        ("object({a=string})", "any", True),
        ("string", "string", True),
        ("string", "number", False),
        ("number", "string", False),
        ("list(string)", "list(string)", True),
        ("set(string)", "list(string)", True),
        ("list(any)", "list(string)", True),
        ("list(number)", "list(string)", False),
        ("list(string)", "tuple([string, string])", True),
        ("tuple([string])", "list(string)", False),
        ("tuple([string, number])", "tuple([string, number])", True),
        ("tuple([string])", "tuple([string, number])", False),
        ("map(string)", "map(string)", True),
        ("map(number)", "map(string)", False),
        ("map(string)", "object({a=string, b=string})", True),
        ("map(string)", "object({a=string, b=number})", False),
        ("object({a=string})", "object({a=string, b=number})", True),
        ("object({a=string, c=bool})", "object({a=string})", False),
        ("object({a=string, c=optional(bool)})", "object({a=string})", True),
        ("object({a=number})", "object({a=string})", False),
        ("object({a=string})", "map(string)", False),
        (
            "object({pods=optional(list(string), []), port=optional(number)})",
            "object({pods=list(string), services=list(string), port=number})",
            True,
        ),
    ],
)
def test_accepts(declared: str, passed: str, expected: bool) -> None:
    assert accepts(parse_type(declared), parse_type(passed)) is expected
