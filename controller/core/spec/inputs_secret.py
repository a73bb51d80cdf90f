"""The durable inputs Secret's codec: its keys, how each value is written and read, and
what makes a Secret malformed. The one writer (spec/inputs.py's `Inputs.secret_data`,
plan/jobspec.py's `inputs_secret`) and every reader (the runner's work directory,
controller/runner/workdir.py; the redaction of a Job's values, core/jobs/sensitive.py;
the inputs an object was applied with, core/decide/contract_inputs.py; the module image
it pinned, core/decide/pinning.py) go through `encode` and `decode`, so they cannot
disagree about what a Secret says, nor about which Secrets say nothing usable.

The keys:
- `module.<file>`: a file of the module, its text (UTF-8); absent for a module image;
- `image`: the module image's reference, in place of the module files;
- `image.digest`: the digest the Job ran (the pin; absent before any lookup);
- `variables.json`: the user variables, canonical JSON of an object (absent: none);
- `contract.json`: the contract inputs, canonical JSON of an object, when the object
  plays a contract role.

A Secret is malformed, and `decode` raises InputsSecretError saying which key and why
(never a value: they may be secret), when a value is not base64 of UTF-8 text, a JSON
key holds no JSON object, a module file's name is no plain file name, or the image's
reference is empty. A Secret with neither module files nor an image is well formed and
has nothing to run: the runner says so (controller/runner/workdir.py). Pure."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from runtime.jsonobj import Json

MODULE_PREFIX = "module."
VARIABLES_KEY = "variables.json"
CONTRACT_KEY = "contract.json"
IMAGE_KEY = "image"
IMAGE_DIGEST_KEY = "image.digest"


class InputsSecretError(ValueError):
    """The inputs Secret is malformed: the message names the key and what is wrong."""


@dataclass(frozen=True)
class InputsData:
    """What an inputs Secret carries."""

    module: Mapping[str, str] = field(default_factory=dict)  # file name -> text
    variables: Json = field(default_factory=dict)
    contract: Json | None = None
    image: str | None = None  # the module image's reference
    digest: str = ""  # the digest pinned with the image; "" before any lookup


def canonical_json(value: object) -> bytes:
    """Keys sorted at every level, no whitespace, UTF-8 with non-ASCII as itself."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def encode(data: InputsData) -> dict[str, bytes]:
    """The Secret's values before base64, by key (their sizes count against its limit)."""
    out = {f"{MODULE_PREFIX}{name}": text.encode() for name, text in data.module.items()}
    if data.image is not None:
        out[IMAGE_KEY] = data.image.encode()
        if data.digest:
            out[IMAGE_DIGEST_KEY] = data.digest.encode()
    out[VARIABLES_KEY] = canonical_json(data.variables)
    if data.contract is not None:
        out[CONTRACT_KEY] = canonical_json(data.contract)
    return out


def secret_data(data: InputsData) -> dict[str, str]:
    """The Secret's `data`: each value of `encode`, base64."""
    return {key: base64.b64encode(value).decode() for key, value in encode(data).items()}


def decode(secret_data: Mapping[str, Any] | None) -> InputsData:
    """What a Secret's `data` carries; raises InputsSecretError when it is malformed."""
    data = secret_data or {}
    module = {}
    for key, raw in data.items():
        if key.startswith(MODULE_PREFIX):
            name = key[len(MODULE_PREFIX) :]
            if not name or name in {".", ".."} or "/" in name:
                message = f"the inputs Secret's module file name {name!r} is not allowed"
                raise InputsSecretError(message)
            module[name] = _text(key, raw)
    image = _text(IMAGE_KEY, data[IMAGE_KEY]) if IMAGE_KEY in data else None
    if image == "":
        raise InputsSecretError(f"the inputs Secret's {IMAGE_KEY} is empty")
    digest = _text(IMAGE_DIGEST_KEY, data[IMAGE_DIGEST_KEY]) if IMAGE_DIGEST_KEY in data else ""
    variables = _object(VARIABLES_KEY, data[VARIABLES_KEY]) if VARIABLES_KEY in data else {}
    contract = _object(CONTRACT_KEY, data[CONTRACT_KEY]) if CONTRACT_KEY in data else None
    return InputsData(module, variables, contract, image, digest)


def _text(key: str, raw: object) -> str:
    try:
        return base64.b64decode(str(raw), validate=True).decode()
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise InputsSecretError(f"the inputs Secret's {key} is not base64 of UTF-8 text") from None


def _object(key: str, raw: object) -> Json:
    try:
        value = orjson.loads(_text(key, raw))
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise InputsSecretError(f"the inputs Secret's {key} is not a JSON object")
    return value
