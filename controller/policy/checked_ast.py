"""The checked syntax tree of a compiled expression, read from its serialized form.

cel-expr-python compiles to cel-cpp's CheckedExpr and hands it out only serialized (a
protobuf `Any`). The static cost estimate (cost.py) needs the tree and the source
positions, so this module reads the few messages of cel.expr's syntax.proto it needs
straight from the protobuf wire format, without the protobuf runtime: `Expr` and its
kinds, and `SourceInfo`'s positions. Fields it does not know are skipped, as protobuf
readers do, so a newer cel-cpp that adds fields still reads."""

from __future__ import annotations

from dataclasses import dataclass, field

# Field numbers of cel.expr's syntax.proto and checked.proto (the stable v1 schema).
_ANY_VALUE = 2
_CHECKED_EXPR = 4
_CHECKED_SOURCE_INFO = 5
_SOURCE_POSITIONS = 4
_EXPR_ID = 2
_EXPR_CONST, _EXPR_IDENT, _EXPR_SELECT, _EXPR_CALL = 3, 4, 5, 6
_EXPR_LIST, _EXPR_STRUCT, _EXPR_COMPREHENSION = 7, 8, 9
# A hostile expression is refused long before this; it bounds the reader's own work.
MAX_DEPTH = 500


class AstError(ValueError):
    """The serialized expression is not a CheckedExpr this reader understands."""


@dataclass
class Node:
    """One expression node: its kind ("const", "ident", "select", "call", "list",
    "struct", "comprehension"), its name (an identifier, a field, a function, a
    comprehension's iteration variable), its children in evaluation order, and for a
    comprehension which child is its range and which run once per element."""

    id: int = 0
    kind: str = "const"
    name: str = ""
    children: list[Node] = field(default_factory=list)
    # For a comprehension: the indexes in `children` of the range and of the loop
    # (condition and step); the rest (the accumulator's start, the result) run once.
    range_index: int = -1
    loop_indexes: tuple[int, ...] = ()
    accumulator: str = ""  # a comprehension's accumulator variable


@dataclass(frozen=True)
class CheckedAst:
    root: Node
    positions: dict[int, int]  # node id -> offset in the source, in code points


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise AstError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of one message: an int for varints and fixed
    widths, bytes for length-delimited fields."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            out.append((number, value))
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise AstError("truncated field")
            out.append((number, data[at : at + size]))
            at += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            out.append((number, int.from_bytes(data[at : at + width], "little")))
            at += width
        else:
            raise AstError(f"unsupported wire type {wire}")
    return out


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise AstError("expected a message")
    return value


def _text(value: int | bytes) -> str:
    return _bytes(value).decode("utf-8", "replace")


def _expr(data: bytes, depth: int = 0) -> Node:
    if depth > MAX_DEPTH:
        raise AstError("expression nested too deep")
    node = Node()
    for number, value in fields(data):
        if number == _EXPR_ID and isinstance(value, int):
            node.id = value
        elif number == _EXPR_CONST:
            node.kind = "const"
        elif number == _EXPR_IDENT:
            node.kind = "ident"
            node.name = next((_text(v) for n, v in fields(_bytes(value)) if n == 1), "")
        elif number in (_EXPR_SELECT, _EXPR_CALL, _EXPR_LIST, _EXPR_STRUCT):
            _compound(node, number, _bytes(value), depth)
        elif number == _EXPR_COMPREHENSION:
            _comprehension(node, _bytes(value), depth)
    return node


_COMPOUND_KINDS = {_EXPR_SELECT: "select", _EXPR_CALL: "call", _EXPR_LIST: "list"}


def _compound(node: Node, number: int, data: bytes, depth: int) -> None:
    """Select (operand 1, field 2), Call (target 1, function 2, args 3), CreateList
    (elements 1), CreateStruct (entries 2, each with a key 3 and a value 4)."""
    node.kind = _COMPOUND_KINDS.get(number, "struct")
    for sub, value in fields(data):
        if number == _EXPR_STRUCT and sub == 2:
            for part, inner in fields(_bytes(value)):
                if part in (3, 4):
                    node.children.append(_expr(_bytes(inner), depth + 1))
        elif sub == 2 and number in (_EXPR_SELECT, _EXPR_CALL):
            node.name = _text(value)
        elif (sub == 1 and number != _EXPR_STRUCT) or (sub == 3 and number == _EXPR_CALL):
            node.children.append(_expr(_bytes(value), depth + 1))


def _comprehension(node: Node, data: bytes, depth: int) -> None:
    """Comprehension: iter_var 1, iter_range 2, accu_var 3, accu_init 4, loop_condition 5,
    loop_step 6, result 7."""
    node.kind = "comprehension"
    loop: list[int] = []
    for number, value in fields(data):
        if number == 1:
            node.name = _text(value)
        elif number == 3:
            node.accumulator = _text(value)
        elif number in (2, 4, 5, 6, 7):
            if number == 2:
                node.range_index = len(node.children)
            elif number in (5, 6):
                loop.append(len(node.children))
            node.children.append(_expr(_bytes(value), depth + 1))
    node.loop_indexes = tuple(loop)


def _positions(data: bytes) -> dict[int, int]:
    out: dict[int, int] = {}
    for number, value in fields(data):
        if number != _SOURCE_POSITIONS:
            continue
        entry = dict(fields(_bytes(value)))
        key, offset = entry.get(1, 0), entry.get(2, 0)
        if isinstance(key, int) and isinstance(offset, int):
            out[key] = offset
    return out


def read(serialized: bytes) -> CheckedAst:
    """The tree and positions of `Expression.serialize()`'s output."""
    body = next((_bytes(v) for n, v in fields(serialized) if n == _ANY_VALUE), None)
    if body is None:
        raise AstError("no CheckedExpr in the serialized expression")
    root, positions = None, {}
    for number, value in fields(body):
        if number == _CHECKED_EXPR:
            root = _expr(_bytes(value))
        elif number == _CHECKED_SOURCE_INFO:
            positions = _positions(_bytes(value))
    if root is None:
        raise AstError("the CheckedExpr holds no expression")
    return CheckedAst(root, positions)
