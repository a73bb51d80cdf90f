"""Hypothesis strategies for objects of a CRD version, drawn from its OpenAPI schema.

What the schema says is honoured: types, required and optional properties, enums,
patterns, lengths, bounds, formats, lists (map and set lists unique by their keys),
maps, int-or-string, and objects that keep unknown fields. The CEL rules of our CRDs are
of two families, and both are honoured too: the `has()` rules between sibling fields
(exactly one, at most one, at least one, one implies another, one required), read from
the rule's text; and the Go durations, drawn from a list every rule accepts. Anything
else a rule refuses, the API server refuses, and a test on it skips that example.

Optional fields are drawn sparingly and lists kept short, so an object stays small
enough to send and read several times per example."""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from datetime import datetime
from typing import Any

from hypothesis import strategies as st

from runtime.jsonobj import Json

Strategy = st.SearchStrategy[Any]
# Durations every interval and window rule of ours accepts (at least 1m, at most 168h).
DURATIONS = ("1m", "90s", "30m", "1h30m", "2h")
_DURATION_UNITS = "(ns|us|µs|μs|ms|s|m|h)"
_TEXT = st.text(alphabet=string.ascii_letters + string.digits + " -_./:é", max_size=12)
_HAS_PAIR = re.compile(
    r"^(?P<neg>!?)\(?has\(self\.(?P<a>\w+)\) (?P<op>!=|&&|\|\||==) "
    r"(?P<nb>!?)has\(self\.(?P<b>\w+)\)\)?$"
)
_EPOCH, _LATEST = datetime(2020, 1, 1), datetime(2030, 1, 1)
_HAS_ONE = re.compile(r"^has\(self\.(?P<a>\w+)\)$")
# Keys no generated metadata may use: a conversion owns it (controller/core/conversion).
RESERVED_ANNOTATIONS = frozenset({"captf.io/conversion-data"})


def of_schema(schema: Json, *, depth: int = 0) -> Strategy:
    """Values valid for `schema` (its CEL `has()` rules included)."""
    if "anyOf" in schema or schema.get("x-kubernetes-int-or-string"):
        return _int_or_string(schema)
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "object":
        return _object(schema, depth)
    if kind == "array":
        return _array(schema, depth)
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return _integer(schema)
    if kind == "number":
        return st.integers(0, 1000)
    if kind == "boolean":
        return st.booleans()
    return st.none()


def _object(schema: Json, depth: int) -> Strategy:
    properties: Json = schema.get("properties") or {}
    if not properties:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return _free(depth)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            keys = st.from_regex(r"[a-z][a-z0-9.]{0,8}", fullmatch=True)
            most = min(int(schema.get("maxProperties", 3)), 3)
            least = int(schema.get("minProperties", 0))
            return st.dictionaries(
                keys, of_schema(extra, depth=depth + 1), min_size=least, max_size=most
            )
        return st.just({})
    required = set(schema.get("required") or [])
    fields = {name: of_schema(sub, depth=depth + 1) for name, sub in properties.items()}
    rules = [r["rule"] for r in schema.get("x-kubernetes-validations") or []]
    least = int(schema.get("minProperties", 0))

    @st.composite
    def build(draw: Callable[[Strategy], Any]) -> Json:
        present = {name for name in fields if name in required or draw(_sometimes(depth))}
        present = _satisfy(rules, present, set(fields), draw)
        if len(present) < least:
            present |= set(sorted(set(fields) - present)[: least - len(present)])
        return {name: draw(fields[name]) for name in sorted(present)}

    return build()


# Deeper optional fields are rarer: whole objects stay a few KiB.
_SHALLOW, _DEEP = st.integers(0, 9).map(lambda n: n < 4), st.integers(0, 9).map(lambda n: n < 2)
_EITHER = st.booleans()


def _sometimes(depth: int) -> Strategy:
    return _SHALLOW if depth < 3 else _DEEP


def _one_of(a: str, b: str, draw: Callable[[Strategy], Any]) -> str:
    return a if draw(_EITHER) else b


def _satisfy(
    rules: list[str], present: set[str], known: set[str], draw: Callable[[Strategy], Any]
) -> set[str]:
    """`present` changed until every `has()` rule among `rules` holds."""
    for rule in rules:
        one = _HAS_ONE.match(rule)
        if one and one["a"] in known:
            present.add(one["a"])
            continue
        pair = _HAS_PAIR.match(rule)
        if not pair or not {pair["a"], pair["b"]} <= known:
            continue
        a, b, op = pair["a"], pair["b"], pair["op"]
        if pair["neg"] and op == "&&":  # not both
            if {a, b} <= present:
                present.discard(_one_of(a, b, draw))
        elif op == "!=":  # exactly one
            present -= {a, b}
            present.add(_one_of(a, b, draw))
        elif op == "||" and pair["nb"]:  # b implies a
            if b in present:
                present.add(a)
        elif op == "||" and not ({a, b} & present):  # at least one
            present.add(_one_of(a, b, draw))
    return present


def _array(schema: Json, depth: int) -> Strategy:
    items = schema.get("items") or {}
    most = min(int(schema.get("maxItems", 2)), 2)
    inner = of_schema(items, depth=depth + 1)
    keys = schema.get("x-kubernetes-list-map-keys")
    if schema.get("x-kubernetes-list-type") == "map" and keys:
        return st.lists(
            inner, max_size=most, unique_by=lambda i: tuple(str(i.get(k)) for k in keys)
        )
    if schema.get("x-kubernetes-list-type") == "set":
        return st.lists(inner, max_size=most, unique_by=repr)
    return st.lists(inner, max_size=most)


def _string(schema: Json) -> Strategy:
    pattern = schema.get("pattern")
    least, most = int(schema.get("minLength", 0)), int(schema.get("maxLength", 40))
    if pattern and _DURATION_UNITS in pattern:
        return st.sampled_from([d for d in DURATIONS if re.fullmatch(pattern, d)])
    if schema.get("format") == "date-time":
        return st.datetimes(min_value=_EPOCH, max_value=_LATEST).map(
            lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    text = st.from_regex(str(pattern), fullmatch=True) if pattern else _TEXT
    return text.filter(lambda s: least <= len(s) <= min(most, 40) and _utf8(s))


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _integer(schema: Json) -> Strategy:
    low = int(schema.get("minimum", 0))
    high = int(schema.get("maximum", low + 100000))
    return st.integers(low, high)


def _int_or_string(schema: Json) -> Strategy:
    pattern = next((a.get("pattern") for a in schema.get("anyOf") or [] if "pattern" in a), None)
    pattern = pattern or schema.get("pattern")
    quantity = st.sampled_from(["1", "100m", "2Gi", "256Mi", "0.5"])
    if pattern:
        quantity = quantity.filter(lambda s: re.fullmatch(pattern, s) is not None)
    return st.one_of(st.integers(0, 64), quantity)


def _free(depth: int) -> Strategy:
    """Any small JSON object: the value of a field that keeps unknown fields."""
    scalar = st.one_of(st.integers(-1000, 1000), st.booleans(), _TEXT)
    keys = st.from_regex(r"[a-z][a-zA-Z0-9_]{0,8}", fullmatch=True)
    return st.dictionaries(keys, scalar, max_size=3 if depth < 4 else 1)


def metadata(namespaced: bool) -> Strategy:
    """Names, labels and annotations as a person writes them (no reserved annotation)."""
    name = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True)
    key = st.from_regex(r"(example\.com/)?[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
    value = st.from_regex(r"([a-z0-9][a-z0-9.-]{0,10}[a-z0-9])?", fullmatch=True)
    note = st.text(alphabet=string.printable, max_size=30)
    labels = st.dictionaries(key, value, max_size=2)
    notes = st.dictionaries(key.filter(lambda k: k not in RESERVED_ANNOTATIONS), note, max_size=2)

    @st.composite
    def build(draw: Callable[[Strategy], Any]) -> Json:
        meta: Json = {"name": draw(name)}
        if found := draw(labels):
            meta["labels"] = found
        if found := draw(notes):
            meta["annotations"] = found
        return meta

    return build()


def crd_object(crd: Json, version: str) -> Strategy:
    """Whole objects of `crd` in `version`: metadata, and spec and status from the schema."""
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = served["schema"]["openAPIV3Schema"]["properties"]
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    namespaced = crd["spec"]["scope"] == "Namespaced"
    parts = {key: of_schema(schema[key]) for key in ("spec", "status") if key in schema}

    @st.composite
    def build(draw: Callable[[Strategy], Any]) -> Json:
        obj: Json = {
            "apiVersion": f"{group}/{version}",
            "kind": kind,
            "metadata": draw(metadata(namespaced)),
        }
        for key, strategy in parts.items():
            obj[key] = draw(strategy)
        return obj

    return build()
