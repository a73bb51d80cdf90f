"""The inputs hash: SHA-256 of the canonical JSON of the module and the overlaid variables.

Expected hashes are computed here without the code under test: from a canonical text
written out by hand, or with json.dumps configured as the spec states."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from controller.core.spec.inputs import InputsMissing, inputs_hash, render
from runtime.jsonobj import Json


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(doc: object) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_hash_of_a_canonical_text_written_by_hand() -> None:
    module = {"variables.tf": "", "main.tf": "x"}
    variables = {"b": 1, "a": {"z": "é", "y": [1, {"d": 2.5, "c": None}], "x": True}}
    text = (
        '{"module":{"main.tf":"x","variables.tf":""},'
        '"variables":{"a":{"x":true,"y":[1,{"c":null,"d":2.5}],"z":"é"},"b":1}}'
    )
    assert inputs_hash(module, variables) == _sha(text)


HASH_CASES: list[tuple[str, Json, Json]] = [
    ("empty", {}, {}),
    ("keys sorted at every level", {"b.tf": "1", "a.tf": "2"}, {"z": {"b": [{"d": 1, "c": 2}]}}),
    ("non-ASCII as itself", {"main.tf": "# größe ✓"}, {"name": "Zürich", "emoji": "🚀"}),
    ("quotes and newlines escaped", {"main.tf": 'a = "b"\n\tc\n'}, {"s": 'x"y\\z'}),
    ("numbers and nulls", {}, {"i": 3, "f": 0.25, "neg": -7, "n": None, "t": False}),
]


@pytest.mark.parametrize(
    ("module", "variables"), [c[1:] for c in HASH_CASES], ids=[c[0] for c in HASH_CASES]
)
def test_hash_is_sha256_of_canonical_json(module: dict[str, str], variables: Json) -> None:
    expected = _sha(_canonical({"module": module, "variables": variables}))
    assert inputs_hash(module, variables) == expected
    assert inputs_hash(module, variables) == expected.lower()
    assert len(expected) == 64


def test_non_ascii_is_not_escaped() -> None:
    escaped = json.dumps(
        {"module": {}, "variables": {"n": "é"}}, sort_keys=True, separators=(",", ":")
    )
    assert "\\u00e9" in escaped
    assert inputs_hash({}, {"n": "é"}) != _sha(escaped)


def _secret(name: str, data: dict[str, str]) -> Json:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"kind": "Secret", "metadata": {"name": name}, "data": encoded}


MODULE_CM = {"mod": {"kind": "ConfigMap", "metadata": {"name": "mod"}, "data": {"main.tf": "m"}}}
SECRETS = {
    "s1": _secret("s1", {"a": "from-s1", "c": "from-s1", "n": "3"}),
    "s2": _secret("s2", {"c": "from-s2", "d": "from-s2"}),
}
SPEC_VARS = {"a": "spec", "b": "spec", "n": 3}

# (case, variablesFrom, the merged variables).
OVERLAYS: list[tuple[str, list[Json], Json]] = [
    ("spec variables alone", [], SPEC_VARS),
    (
        "without key: every key of the Secret, as strings",
        [{"secretRef": {"name": "s1"}}],
        {"a": "from-s1", "b": "spec", "c": "from-s1", "n": "3"},
    ),
    (
        "with key: that one variable only",
        [{"secretRef": {"name": "s2", "key": "c"}}],
        {"a": "spec", "b": "spec", "c": "from-s2", "n": 3},
    ),
    (
        "in order: the later entry wins",
        [{"secretRef": {"name": "s1"}}, {"secretRef": {"name": "s2", "key": "c"}}],
        {"a": "from-s1", "b": "spec", "c": "from-s2", "n": "3"},
    ),
    (
        "in the other order: s1 wins",
        [{"secretRef": {"name": "s2", "key": "c"}}, {"secretRef": {"name": "s1"}}],
        {"a": "from-s1", "b": "spec", "c": "from-s1", "n": "3"},
    ),
    (
        "both whole Secrets",
        [{"secretRef": {"name": "s2"}}, {"secretRef": {"name": "s1"}}],
        {"a": "from-s1", "b": "spec", "c": "from-s1", "d": "from-s2", "n": "3"},
    ),
]


@pytest.mark.parametrize(
    ("variables_from", "merged"), [c[1:] for c in OVERLAYS], ids=[c[0] for c in OVERLAYS]
)
def test_variables_from_overlay(variables_from: list[Json], merged: Json) -> None:
    spec = {
        "source": {"configMapRef": {"name": "mod"}},
        "variables": SPEC_VARS,
        "variablesFrom": variables_from,
    }
    inputs = render(spec, MODULE_CM, SECRETS)
    assert inputs.variables == merged
    assert inputs.hash == _sha(_canonical({"module": {"main.tf": "m"}, "variables": merged}))
    assert inputs.hash8 == inputs.hash[:8]


@pytest.mark.parametrize(
    "spec",
    [
        {"source": {"configMapRef": {"name": "absent"}}},
        {
            "source": {"configMapRef": {"name": "mod"}},
            "variablesFrom": [{"secretRef": {"name": "x"}}],
        },
        {
            "source": {"configMapRef": {"name": "mod"}},
            "variablesFrom": [{"secretRef": {"name": "s2", "key": "nope"}}],
        },
    ],
    ids=["module ConfigMap", "variables Secret", "variables Secret key"],
)
def test_missing_inputs(spec: Json) -> None:
    with pytest.raises(InputsMissing):
        render(spec, MODULE_CM, SECRETS)
