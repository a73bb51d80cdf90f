"""Durable inputs: the rendered module, variables and contract inputs one Job runs with.

The inputs hash is the lowercase hex SHA-256 of the canonical JSON of
`{"module": <ConfigMap data>, "variables": <merged variables>}`: keys sorted at
every level, no whitespace, UTF-8 with non-ASCII characters as themselves. An object
that plays a role of the module contract (controller/core/contract) adds
`"contract": <the hashed contract inputs>`: exactly what the module receives from the
spec (no uid, no metadata), so a moved object hashes the same and re-applies nothing.
Without contract inputs the document is the two-key one, so every hash recorded before
the contract keeps its value. A module image source (spec.source.image) leaves
"module" empty and adds `"image": <reference>`: the controller never sees the image's
files, so a new reference is what changes the inputs. Once the reference is resolved
to a digest (controller/core/decide/pinning.py), the document adds `"imageDigest":
<sha256:...>` too: a new digest behind the same tag is new inputs. The pull policy is
not hashed: it changes when the image is fetched, not what runs."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from controller.core.basics.names import SECRET_SIZE_LIMIT
from controller.core.spec import inputs_secret
from controller.core.spec.inputs_secret import InputsData, canonical_json
from controller.core.spec.refs import (
    CONFIGMAP,
    ModuleImage,
    VariableSource,
    module_configmap,
    module_image,
    variable_sources,
)
from runtime.jsonobj import Json


class InputsMissing(LookupError):
    """The module ConfigMap, a variablesFrom Secret, or one of its keys is absent."""


@dataclass(frozen=True)
class Inputs:
    module: dict[str, str]
    variables: Json
    # Variables whose values came from variablesFrom Secrets: redacted from messages.
    # Not part of the hash: which Secret held a value does not change what runs.
    secret_names: frozenset[str] = frozenset()
    # The contract inputs as rendered into the root (`contract.json`), and the part of
    # them the hash covers (contract.hashed_inputs: a pool's replicas leave it while
    # autoscaling owns the count); both None for an object outside the contract.
    contract: Json | None = None
    contract_hashed: Json | None = None
    # The module image of an image source (then `module` is empty); None for a ConfigMap.
    image: ModuleImage | None = None

    @cached_property
    def hash(self) -> str:
        # Once per Inputs: a pass asks for it a dozen times (the status, the Job, the
        # apply due, ...), and `replace` makes a new Inputs for any change. The fields
        # are never changed in place.
        image = self.image
        return inputs_hash(
            self.module,
            self.variables,
            self.contract_hashed,
            image=image.reference if image is not None else None,
            digest=image.digest if image is not None else "",
        )

    @property
    def hash8(self) -> str:
        return self.hash[:8]

    def carried(self) -> InputsData:
        """What the durable inputs Secret carries of these inputs (inputs_secret.py)."""
        image = self.image
        return InputsData(
            module=self.module,
            variables=self.variables,
            contract=self.contract,
            image=image.reference if image is not None else None,
            digest=image.digest if image is not None else "",
        )

    def secret_data(self) -> dict[str, bytes]:
        """The durable inputs Secret's values before base64, by key (inputs_secret.py)."""
        return inputs_secret.encode(self.carried())

    def size(self) -> int:
        """Bytes of Secret data, as the API server counts them against its limit."""
        return sum(len(value) for value in self.secret_data().values())

    def too_large(self) -> bool:
        return self.size() > SECRET_SIZE_LIMIT


def inputs_hash(
    module: Mapping[str, str],
    variables: Mapping[str, Any],
    contract: Mapping[str, Any] | None = None,
    *,
    image: str | None = None,
    digest: str = "",
) -> str:
    document: Json = {"module": dict(module), "variables": dict(variables)}
    if contract is not None:
        document["contract"] = dict(contract)
    if image is not None:
        document["image"] = image
    if image is not None and digest:
        document["imageDigest"] = digest
    return hashlib.sha256(canonical_json(document)).hexdigest()


def decode_secret_value(secret: Json, key: str) -> str:
    """A Secret data value as text; raises InputsMissing when absent or not UTF-8 base64."""
    data = secret.get("data") or {}
    if key not in data:
        name = secret.get("metadata", {}).get("name", "?")
        raise InputsMissing(f"Secret {name} has no key {key!r}")
    try:
        return base64.b64decode(data[key], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, TypeError):
        name = secret.get("metadata", {}).get("name", "?")
        raise InputsMissing(f"Secret {name} key {key!r} is not UTF-8 text") from None


def render(spec: Json, configmaps: Mapping[str, Json], secrets: Mapping[str, Json]) -> Inputs:
    """Renders the inputs of an object's spec from the ConfigMaps and Secrets by name.

    Variables are spec.variables overlaid, in order, by each variablesFrom entry:
    with `key`, one variable of that name; without, every key of the Secret or
    ConfigMap. Only variables from Secrets are secret (redacted from messages)."""
    image = module_image(spec)
    module = _module_files(spec, configmaps) if image is None else {}
    variables: Json = dict(spec.get("variables") or {})
    secret_names: set[str] = set()
    for source in variable_sources(spec):
        if source.kind == CONFIGMAP:
            variables |= _from_configmap(source, configmaps)
            continue
        secret = secrets.get(source.name)
        if secret is None:
            raise InputsMissing(f"variables Secret {source.name or '(unnamed)'} not found")
        keys = [source.key] if source.key else sorted((secret.get("data") or {}).keys())
        for key in keys:
            variables[key] = decode_secret_value(secret, key)
            secret_names.add(key)
    return Inputs(
        module=module, variables=variables, secret_names=frozenset(secret_names), image=image
    )


def _module_files(spec: Json, configmaps: Mapping[str, Json]) -> dict[str, str]:
    """The module's files: the data of the spec.source.configMapRef ConfigMap."""
    cm_name = module_configmap(spec)
    configmap = configmaps.get(cm_name) if cm_name else None
    if configmap is None:
        raise InputsMissing(f"module ConfigMap {cm_name or '(unnamed)'} not found")
    return {str(k): str(v) for k, v in (configmap.get("data") or {}).items()}


def _from_configmap(source: VariableSource, configmaps: Mapping[str, Json]) -> dict[str, str]:
    """The variables of one configMapRef entry: its `key`, or every key of the ConfigMap.
    A key the ConfigMap lacks is missing input, as for a Secret."""
    name, key = source.name, source.key
    configmap = configmaps.get(name) if name else None
    if configmap is None:
        raise InputsMissing(f"variables ConfigMap {name or '(unnamed)'} not found")
    data = {str(k): str(v) for k, v in (configmap.get("data") or {}).items()}
    if not key:
        return dict(sorted(data.items()))
    if key not in data:
        raise InputsMissing(f"variables ConfigMap {name} has no key {key}")
    return {key: data[key]}
