"""A pod's imagePullSecrets merged into the Docker config crane reads."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from controller.dev.node.pullsecrets import auths_of, pull_credentials
from runtime.jsonobj import Json


def secret(kind: str, key: str, value: Json | str) -> Json:
    raw = value if isinstance(value, str) else json.dumps(value)
    return {"type": kind, "data": {key: base64.b64encode(raw.encode()).decode()}}


def config_json(auths: Json) -> Json:
    return secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", {"auths": auths})


class Reader:
    def __init__(self, secrets: dict[str, Json]) -> None:
        self.secrets = secrets

    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        assert (kind, namespace) == ("secrets", "ns")
        return self.secrets.get(name)


def pod(*names: str) -> Json:
    return {
        "metadata": {"namespace": "ns"},
        "spec": {"imagePullSecrets": [{"name": n} for n in names]},
    }


async def test_the_secrets_auths_are_merged_the_first_naming_a_registry_winning(
    tmp_path: Path,
) -> None:
    reader = Reader(
        {
            "a": config_json({"r1:5000": {"auth": "YTpi"}}),
            "b": config_json({"r1:5000": {"auth": "other"}, "r2": {"username": "u"}}),
            "old": secret("kubernetes.io/dockercfg", ".dockercfg", {"r3": {"auth": "eDp5"}}),
        }
    )
    found = await pull_credentials(pod("a", "b", "old"), reader, tmp_path / "auth")
    assert found.docker_config == tmp_path / "auth"
    assert found.skipped == []
    written = json.loads((tmp_path / "auth/config.json").read_text())
    assert written == {
        "auths": {"r1:5000": {"auth": "YTpi"}, "r2": {"username": "u"}, "r3": {"auth": "eDp5"}}
    }
    assert stat.S_IMODE((tmp_path / "auth/config.json").stat().st_mode) == 0o600


async def test_missing_and_unusable_secrets_are_passed_over_saying_why(tmp_path: Path) -> None:
    reader = Reader({"opaque": {"type": "Opaque", "data": {}}})
    found = await pull_credentials(pod("gone", "opaque"), reader, tmp_path / "auth")
    assert found.docker_config is None
    assert found.skipped == [
        "imagePullSecret ns/gone not found",
        "imagePullSecret ns/opaque: type Opaque is not kubernetes.io/dockerconfigjson",
    ]
    assert not (tmp_path / "auth").exists()


async def test_a_pod_without_pull_secrets_has_no_credentials(tmp_path: Path) -> None:
    found = await pull_credentials({"metadata": {"namespace": "ns"}}, Reader({}), tmp_path)
    assert found.docker_config is None


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"type": "kubernetes.io/dockerconfigjson", "data": {}}, "without the key"),
        (secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", "not json"), "base64 JSON"),
        (secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", {"x": 1}), "no auths"),
    ],
)
def test_a_malformed_secret_holds_no_credentials(bad: Json, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        auths_of(bad)
