"""The local cluster's OCI registry: distribution's `registry` on loopback, pushed to
with crane, storing under its working directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runtime.envtest.registry import Registry
from tests.registry_support import REGISTRY_USER, crane, dockerconfigjson, layer, push

pytestmark = pytest.mark.kube


def test_the_registry_listens_on_loopback_and_stores_under_its_directory(
    registry: Registry, tmp_path: Path
) -> None:
    config = json.loads((registry.log.parent / "config.yml").read_text())
    assert config["http"]["addr"] == registry.host
    assert registry.host.startswith("127.0.0.1:")
    assert "debug" not in config["http"]
    assert "auth" not in config

    digest = push(registry, "registry/one:v1", [layer(tmp_path / "l.tar.gz", {"a.txt": b"A"})])

    assert digest.startswith("sha256:")
    assert crane(registry, "ls", f"{registry.host}/registry/one") == "v1"
    blob = registry.storage / "docker/registry/v2/blobs/sha256" / digest[7:9] / digest[7:] / "data"
    assert blob.is_file()
    manifest = json.loads(crane(registry, "manifest", f"{registry.host}/registry/one:v1"))
    assert [entry["mediaType"] for entry in manifest["layers"]] == [
        "application/vnd.oci.image.layer.v1.tar+gzip"
    ]


def test_a_missing_image_is_not_found(registry: Registry) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        crane(registry, "digest", f"{registry.host}/registry/absent:v1")
    assert "MANIFEST_UNKNOWN" in failed.value.stderr or "NAME_UNKNOWN" in failed.value.stderr


def test_the_htpasswd_registry_wants_credentials(auth_registry: Registry, tmp_path: Path) -> None:
    config = json.loads((auth_registry.log.parent / "config.yml").read_text())
    assert config["auth"]["htpasswd"]["path"].endswith("htpasswd")
    docker = tmp_path / "docker"
    docker.mkdir()
    (docker / "config.json").write_text(dockerconfigjson(auth_registry.host, *REGISTRY_USER))
    files = [layer(tmp_path / "l.tar.gz", {"a": b"A"})]

    digest = push(auth_registry, "auth/one:v1", files, docker_config=docker)

    assert digest.startswith("sha256:")
    with pytest.raises(subprocess.CalledProcessError) as anonymous:
        crane(auth_registry, "digest", f"{auth_registry.host}/auth/one:v1")
    assert "UNAUTHORIZED" in anonymous.value.stderr
