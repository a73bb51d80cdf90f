"""The inputs Secret has one codec (controller/core/spec/inputs_secret.py): what the
writer encodes every reader decodes as it was, and every reader (the runner's work
directory, the redaction of a Job's values, the inputs an object was applied with, the
module image it pinned) refuses exactly the Secrets the codec calls malformed, for the
codec's reason."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.decide import contract_inputs, pinning
from controller.core.jobs import sensitive
from controller.core.spec import inputs_secret
from controller.core.spec.inputs import Inputs
from controller.core.spec.inputs_secret import (
    CONTRACT_KEY,
    IMAGE_DIGEST_KEY,
    IMAGE_KEY,
    VARIABLES_KEY,
    InputsData,
    InputsSecretError,
)
from controller.core.spec.refs import ModuleImage
from controller.runner import workdir
from runtime.jsonobj import Json

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
NAME = st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True).filter(lambda n: n not in {".", ".."})
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
OBJECT = st.dictionaries(TEXT, JSON, max_size=5)


@st.composite
def carried(draw: st.DrawFn) -> InputsData:
    image = draw(st.one_of(st.none(), TEXT.filter(bool)))
    digest = draw(TEXT) if image is not None else ""
    module = draw(st.dictionaries(NAME, TEXT, max_size=4))
    contract = draw(st.one_of(st.none(), OBJECT))
    return InputsData(module, draw(OBJECT), contract, image, digest)


@settings(max_examples=300, deadline=None)
@given(carried())
def test_what_is_encoded_decodes_as_it_was(data: InputsData) -> None:
    assert inputs_secret.decode(inputs_secret.secret_data(data)) == data


def test_the_writer_writes_through_the_codec() -> None:
    image = ModuleImage("registry.example/m:1", "IfNotPresent", "sha256:" + "ab" * 32)
    inputs = Inputs({}, {"size": 3}, contract={"captf_contract": "v1alpha1"}, image=image)
    data = inputs_secret.decode(
        {k: base64.b64encode(v).decode() for k, v in inputs.secret_data().items()}
    )
    assert data == inputs.carried()
    assert (data.image, data.digest) == (image.reference, image.digest)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


# A well-formed Secret: a module of files and an image, variables and contract inputs,
# each holding a value no reader would hide unless it refused the Secret.
PLAIN = ("visible-variable-1234", "visible-input-5678")
BASE = inputs_secret.secret_data(
    InputsData(
        {"main.tf": 'variable "plain" {}\n'},
        {"plain": PLAIN[0]},
        {"plain_input": PLAIN[1]},
        "registry.example/m:1",
        "sha256:" + "cd" * 32,
    )
)
# One key made malformed at a time, with the codec's reason.
BROKEN: list[tuple[str, str | None, str]] = [
    (VARIABLES_KEY, "!!!", "variables.json is not base64 of UTF-8 text"),
    (VARIABLES_KEY, _b64(b"\xff\xfe"), "variables.json is not base64 of UTF-8 text"),
    (VARIABLES_KEY, _b64(b"[1]"), "variables.json is not a JSON object"),
    (VARIABLES_KEY, _b64(b"{"), "variables.json is not a JSON object"),
    (CONTRACT_KEY, _b64(b"3"), "contract.json is not a JSON object"),
    (CONTRACT_KEY, "not base64", "contract.json is not base64 of UTF-8 text"),
    (IMAGE_KEY, _b64(b""), "image is empty"),
    (IMAGE_KEY, _b64(b"\xc3"), "image is not base64 of UTF-8 text"),
    (IMAGE_DIGEST_KEY, "%%", "image.digest is not base64 of UTF-8 text"),
    ("module.main.tf", _b64(b"\x80"), "module.main.tf is not base64 of UTF-8 text"),
    ("module.a/b.tf", _b64(b"x"), "module file name 'a/b.tf' is not allowed"),
    ("module...", _b64(b"x"), "module file name '..' is not allowed"),
    ("module.", _b64(b"x"), "module file name '' is not allowed"),
]


def _secret(data: dict[str, Any]) -> Json:
    return {"metadata": {"name": "c1-inputs-1"}, "data": data}


def _refusals(secret: Json) -> dict[str, bool | str]:
    """Whether each reader refused the Secret (and the runner's reason)."""
    try:
        workdir.carried(secret)
        runner: bool | str = False
    except workdir.RenderError as err:
        runner = str(err)
    current = Inputs({}, {})
    hidden = sensitive.inputs_values(secret, [])
    return {
        "runner": runner,
        "applied": contract_inputs._inputs_of(secret, current) is None,
        "previous": contract_inputs._carried(secret) is None,
        "pinned": pinning.secret_image(secret) is None,
        "redaction": bool(hidden & set(PLAIN)),
    }


def test_no_reader_refuses_a_well_formed_secret() -> None:
    assert _refusals(_secret(BASE)) == dict.fromkeys(
        ("runner", "applied", "previous", "pinned", "redaction"), False
    )


@pytest.mark.parametrize(("key", "raw", "why"), BROKEN, ids=[b[2] for b in BROKEN])
def test_every_reader_refuses_a_malformed_secret_for_the_codecs_reason(
    key: str, raw: str | None, why: str
) -> None:
    secret = _secret(BASE | {key: raw})
    with pytest.raises(InputsSecretError) as refused:
        inputs_secret.decode(secret["data"])
    assert str(refused.value).endswith(why)
    assert _refusals(secret) == {
        "runner": str(refused.value),
        "applied": True,
        "previous": True,
        "pinned": True,
        "redaction": True,
    }


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(BASE)), st.binary(max_size=12))
def test_readers_agree_on_any_value_in_any_key(key: str, raw: bytes) -> None:
    """Whatever one key holds (base64 of any bytes, or the bytes themselves as text),
    every reader refuses the Secret exactly when the codec does."""
    for value in (_b64(raw), raw.decode("latin-1")):
        secret = _secret(BASE | {key: value})
        try:
            inputs_secret.decode(secret["data"])
            malformed: str | None = None
        except InputsSecretError as err:
            malformed = str(err)
        found = _refusals(secret)
        assert found["runner"] == (malformed or False)
        refused = malformed is not None
        assert found["applied"] == found["previous"] == found["pinned"] == refused
        assert found["redaction"] == refused
