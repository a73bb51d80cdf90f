"""The module's outputs, written to the Secret `spec.outputs.secretName` after an apply.

`tofu output -json` gives `{name: {value, type, sensitive}}`. Each chosen output
becomes one key of the Secret: a string as it is, anything else as its JSON. The
Secret is owned by the object (it goes with it) and labelled with the object's
name; sensitive outputs are written like the others, since a Secret is where they
belong, and only their names ever appear in the result."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import orjson

from controller.core.basics.names import API_VERSION, LABEL_OUTPUTS_OF, MANAGED_BY
from runtime.jsonobj import Json


class OutputsError(ValueError):
    """The outputs cannot be written as asked; the message names what is missing."""


def chosen(shown: Json, names: tuple[str, ...] | None) -> dict[str, bytes]:
    """Secret data for the outputs named (all of them when `names` is None)."""
    wanted = sorted(shown) if names is None else list(names)
    missing = [n for n in wanted if n not in shown]
    if missing:
        raise OutputsError(f"the module has no output {', '.join(missing)}")
    out: dict[str, bytes] = {}
    for name in wanted:
        value = (shown[name] or {}).get("value")
        out[name] = value.encode() if isinstance(value, str) else orjson.dumps(value)
    return out


def secret_body(
    name: str,
    data: dict[str, bytes],
    *,
    object_name: str,
    object_kind: str,
    object_uid: str | None,
    labels: Mapping[str, str] = MANAGED_BY,
) -> Json:
    metadata: Json = {"name": name, "labels": {**labels, LABEL_OUTPUTS_OF: object_name}}
    if object_uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": API_VERSION,
                "kind": object_kind,
                "name": object_name,
                "uid": object_uid,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }
