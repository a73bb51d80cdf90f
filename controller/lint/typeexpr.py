"""Terraform type constraints, read from their expression text, and whether a module's
declared type takes every value the generated root passes for a contract input.

The root declares each contract input with the contract's type, so what reaches the
module is a value of exactly that type; the module's own declaration then converts it.
`accepts` answers: does that conversion succeed for every such value?

- `any`, on either side, accepts: the module takes anything, or the contract promises no
  shape to check against (`captf_cluster_outputs` is whatever the cluster exported).
- A primitive accepts only itself. Terraform would convert a number to a string, but a
  module that declares `string` for `replicas` has most likely made a mistake.
- A list or set accepts a list, set or tuple whose elements it accepts; a tuple accepts
  only a tuple of the same length, position by position (a list has no fixed length).
- A map accepts a map, or an object whose every attribute its element type accepts.
- An object accepts an object that has each of its attributes, with an accepted type,
  except those it marks `optional(...)`: a missing optional attribute is filled in, and
  attributes it does not declare are dropped on conversion."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRIMITIVES = frozenset({"string", "number", "bool", "any"})
COLLECTIONS = frozenset({"list", "set", "map"})
SEQUENCES = frozenset({"list", "set", "tuple"})

# Quoted strings (escapes honoured, so an escaped quote never ends one), brackets and
# separators, and runs of anything else. A bracket inside an `optional` default's string
# is part of the string, so it never unbalances the skip over that default. A string
# left open runs to where it can go no further (one token, which no type accepts), so
# no `"` is scanned from again: the tokens take time linear in the text.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[(){}\[\],=:]|[^\s(){}\[\],=:"]+')


class TypeSyntaxError(ValueError):
    """Text that is not a type constraint this reader knows."""


@dataclass(frozen=True)
class TypeExpr:
    kind: str
    # The element type of a list, set or map.
    element: TypeExpr | None = None
    # A tuple's element types, in order.
    elements: tuple[TypeExpr, ...] = ()
    # An object's attribute types, and which of them are optional(...).
    attributes: dict[str, TypeExpr] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()


def parse_type(text: str) -> TypeExpr:
    """The type an expression text names. A `${...}` wrapper, as some HCL readers render
    an expression, is taken off first."""
    text = text.strip()
    if text.startswith("${") and text.endswith("}"):
        text = text[2:-1]
    reader = _Reader(_TOKEN.findall(text))
    parsed = reader.type()
    if not reader.done:
        raise TypeSyntaxError(f"unexpected {reader.peek()!r} after the type")
    return parsed


class _Reader:
    """Recursive descent over the tokens of one type expression."""

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = tokens
        self._at = 0

    @property
    def done(self) -> bool:
        return self._at >= len(self._tokens)

    def peek(self) -> str:
        return "" if self.done else self._tokens[self._at]

    def take(self) -> str:
        token = self.peek()
        self._at += 1
        return token

    def expect(self, token: str) -> None:
        got = self.take()
        if got != token:
            raise TypeSyntaxError(f"expected {token!r}, found {got or 'the end'!r}")

    def type(self) -> TypeExpr:
        kind = self.take()
        if kind in PRIMITIVES:
            return TypeExpr(kind)
        if kind in COLLECTIONS:
            self.expect("(")
            element = self.type()
            self.expect(")")
            return TypeExpr(kind, element=element)
        if kind == "tuple":
            return self._tuple()
        if kind == "object":
            return self._object()
        raise TypeSyntaxError(f"unknown type {kind or 'at the end'!r}")

    def _tuple(self) -> TypeExpr:
        self.expect("(")
        self.expect("[")
        elements: list[TypeExpr] = []
        while self.peek() != "]":
            elements.append(self.type())
            self._separator("]")
        self.expect("]")
        self.expect(")")
        return TypeExpr("tuple", elements=tuple(elements))

    def _object(self) -> TypeExpr:
        self.expect("(")
        self.expect("{")
        attributes: dict[str, TypeExpr] = {}
        optional: set[str] = set()
        while self.peek() != "}":
            name = self.take().strip('"')
            if not name:
                raise TypeSyntaxError("an object type that never closes")
            if self.take() not in ("=", ":"):
                raise TypeSyntaxError(f"expected = after attribute {name!r}")
            if self.peek() == "optional":
                self.take()
                self.expect("(")
                attributes[name] = self.type()
                self._skip_default()
                optional.add(name)
            else:
                attributes[name] = self.type()
            self._separator("}")
        self.expect("}")
        self.expect(")")
        return TypeExpr("object", attributes=attributes, optional=frozenset(optional))

    def _separator(self, closing: str) -> None:
        if self.peek() == ",":
            self.take()
        elif self.peek() != closing and self.done:
            raise TypeSyntaxError(f"expected {closing!r}, found the end")

    def _skip_default(self) -> None:
        """Past the closing `)` of `optional(T[, default])`: the default is any value
        expression, which decides nothing about what the type accepts."""
        depth = 0
        while not self.done:
            token = self.take()
            if token in ("(", "{", "["):
                depth += 1
            elif token in (")", "}", "]"):
                if depth == 0:
                    return
                depth -= 1
        raise TypeSyntaxError("optional(...) never closes")


def accepts(declared: TypeExpr, passed: TypeExpr) -> bool:
    """Whether a variable of type `declared` takes every value of type `passed`."""
    if declared.kind == "any" or passed.kind == "any":
        return True
    if declared.kind in SEQUENCES and passed.kind in SEQUENCES:
        return _accepts_sequence(declared, passed)
    if declared.kind == "map" and passed.kind == "object":
        element = _element(declared)
        return all(accepts(element, each) for each in passed.attributes.values())
    if declared.kind != passed.kind:
        return False
    if declared.kind == "map":
        return accepts(_element(declared), _element(passed))
    if declared.kind == "object":
        return _accepts_object(declared, passed)
    return True


def _accepts_sequence(declared: TypeExpr, passed: TypeExpr) -> bool:
    if declared.kind == "tuple":
        return (
            passed.kind == "tuple"
            and len(declared.elements) == len(passed.elements)
            and all(map(accepts, declared.elements, passed.elements))
        )
    element = _element(declared)
    if passed.kind == "tuple":
        return all(accepts(element, each) for each in passed.elements)
    return accepts(element, _element(passed))


def _element(collection: TypeExpr) -> TypeExpr:
    # The reader sets it on every list, set and map; only they are asked.
    assert collection.element is not None
    return collection.element


def _accepts_object(declared: TypeExpr, passed: TypeExpr) -> bool:
    for name, wanted in declared.attributes.items():
        given = passed.attributes.get(name)
        if given is None:
            if name not in declared.optional:
                return False
        elif not accepts(wanted, given):
            return False
    return True
