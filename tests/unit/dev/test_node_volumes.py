"""A pod's volumes on this machine: directories, files, the token, and path rewriting."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from controller.dev.node.env import Missing, Unsupported
from controller.dev.node.volumes import Mounts, container_mounts, fill_volumes
from runtime.incluster import SERVICE_ACCOUNT_DIR_ENV
from runtime.jsonobj import Json


class Source:
    def __init__(self, objects: dict[tuple[str, str], Json]) -> None:
        self.objects = objects
        self.minted: list[tuple[str, str | None, int]] = []

    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        return self.objects.get((kind, name))

    async def mint_token(self, pod: Json, audience: str | None, expiration_seconds: int) -> str:
        self.minted.append((pod["metadata"]["name"], audience, expiration_seconds))
        return f"tok-{pod['metadata']['name']}"


# What the ServiceAccount admission plugin adds to every pod.
API_ACCESS: Json = {
    "name": "kube-api-access-x1",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                    ]
                }
            },
        ]
    },
}


def pod(*volumes: Json) -> Json:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"volumes": list(volumes)},
    }


SOURCE = Source(
    {
        ("configmaps", "kube-root-ca.crt"): {"data": {"ca.crt": "CA PEM"}},
        ("secrets", "s"): {"data": {"k": base64.b64encode(b"v").decode(), "x": "eA=="}},
    }
)


async def test_the_api_access_volume_holds_token_ca_and_namespace(tmp_path: Path) -> None:
    source = Source(SOURCE.objects)
    volumes = await fill_volumes(pod(API_ACCESS), tmp_path, source)
    directory = volumes["kube-api-access-x1"]
    assert (directory / "token").read_text() == "tok-p"
    assert (directory / "ca.crt").read_text() == "CA PEM"
    assert (directory / "namespace").read_text() == "ns"
    assert stat.S_IMODE((directory / "token").stat().st_mode) == 0o600
    assert source.minted == [("p", None, 3607)]
    container = {
        "volumeMounts": [
            {
                "name": "kube-api-access-x1",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ]
    }
    mounts = container_mounts(container, volumes)
    assert mounts.env() == {SERVICE_ACCOUNT_DIR_ENV: str(directory)}


async def test_empty_dirs_and_secret_items(tmp_path: Path) -> None:
    secret = {
        "name": "creds",
        "secret": {"secretName": "s", "items": [{"key": "k", "path": "sub/key"}]},
    }
    volumes = await fill_volumes(pod({"name": "tmp", "emptyDir": {}}, secret), tmp_path, SOURCE)
    assert list(volumes["tmp"].iterdir()) == []
    assert (volumes["creds"] / "sub" / "key").read_bytes() == b"v"
    assert not (volumes["creds"] / "x").exists()


async def test_a_missing_secret_is_waited_for_unless_optional(tmp_path: Path) -> None:
    with pytest.raises(Missing):
        await fill_volumes(pod({"name": "v", "secret": {"secretName": "absent"}}), tmp_path, SOURCE)
    optional = {"name": "v", "secret": {"secretName": "absent", "optional": True}}
    assert (await fill_volumes(pod(optional), tmp_path, SOURCE))["v"].is_dir()


@pytest.mark.parametrize(
    "volume",
    [
        {"name": "v", "hostPath": {"path": "/"}},
        {"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "../out"}]}},
        {"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "/etc/x"}]}},
    ],
)
async def test_what_the_node_cannot_or_must_not_do_is_refused(tmp_path: Path, volume: Json) -> None:
    with pytest.raises(Unsupported):
        await fill_volumes(pod(volume), tmp_path, SOURCE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/tmp", "/pod/tmp"),
        ("/tmp/work", "/pod/tmp/work"),
        ("/tmpfile", "/tmpfile"),
        ("/data/x/y", "/pod/data-x/y"),
        ("/data/z", "/pod/data/z"),
        ("--dir=/tmp", "--dir=/tmp"),
        ("relative/tmp", "relative/tmp"),
    ],
)
def test_paths_under_a_mount_are_rewritten_the_longest_mount_first(
    text: str, expected: str
) -> None:
    mounts = Mounts(
        {"/tmp": Path("/pod/tmp"), "/data": Path("/pod/data"), "/data/x": Path("/pod/data-x")}
    )
    assert mounts.rewrite(text) == expected
    assert mounts.env() == {"TMPDIR": "/pod/tmp"}
