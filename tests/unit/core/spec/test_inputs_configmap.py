"""variablesFrom configMapRef: variables from a ConfigMap, overlaid in order like Secrets,
part of the inputs hash, and not secret."""

from __future__ import annotations

import pytest

from controller.core.spec.inputs import InputsMissing, render
from runtime.jsonobj import Json
from tests.builders import (
    module_configmap,
    secret,
)


def _spec(*entries: Json) -> Json:
    return {
        "source": {"configMapRef": {"name": "c1-module"}},
        "variables": {"size": 1, "region": "eu"},
        "variablesFrom": list(entries),
    }


def _cm(name: str, data: dict[str, str]) -> Json:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


CONFIGMAPS = {
    "c1-module": module_configmap(),
    "sizes": _cm("sizes", {"size": "3", "zone": "b"}),
}
SECRETS = {"vars": secret("vars", {"zone": "c"})}


@pytest.mark.parametrize(
    ("entries", "variables", "secret_names"),
    [
        ([{"configMapRef": {"name": "sizes"}}], {"size": "3", "region": "eu", "zone": "b"}, set()),
        (
            [{"configMapRef": {"name": "sizes", "key": "zone"}}],
            {"size": 1, "region": "eu", "zone": "b"},
            set(),
        ),
        (
            [{"configMapRef": {"name": "sizes"}}, {"secretRef": {"name": "vars", "key": "zone"}}],
            {"size": "3", "region": "eu", "zone": "c"},
            {"zone"},
        ),
        (
            [{"secretRef": {"name": "vars", "key": "zone"}}, {"configMapRef": {"name": "sizes"}}],
            {"size": "3", "region": "eu", "zone": "b"},
            {"zone"},
        ),
    ],
)
def test_configmap_variables_overlay_in_order(
    entries: list[Json], variables: Json, secret_names: set[str]
) -> None:
    inputs = render(_spec(*entries), CONFIGMAPS, SECRETS)
    assert inputs.variables == variables
    assert set(inputs.secret_names) == secret_names


def test_the_hash_follows_the_configmap() -> None:
    spec = _spec({"configMapRef": {"name": "sizes", "key": "size"}})
    before = render(spec, CONFIGMAPS, SECRETS).hash
    changed = CONFIGMAPS | {"sizes": _cm("sizes", {"size": "4", "zone": "b"})}
    assert render(spec, changed, SECRETS).hash != before
    other_key = CONFIGMAPS | {"sizes": _cm("sizes", {"size": "3", "zone": "x"})}
    assert render(spec, other_key, SECRETS).hash == before


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"configMapRef": {"name": "nope"}}, "variables ConfigMap nope not found"),
        (
            {"configMapRef": {"name": "sizes", "key": "nope"}},
            "variables ConfigMap sizes has no key nope",
        ),
    ],
)
def test_missing_configmap_input_waits(entry: Json, message: str) -> None:
    with pytest.raises(InputsMissing, match=message):
        render(_spec(entry), CONFIGMAPS, SECRETS)
