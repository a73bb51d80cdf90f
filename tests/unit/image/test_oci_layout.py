"""A module image's OCI layout: the same layers and metadata make the same digest, the
config carries the labels, platform and user, and every blob is named by its content."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from controller.image import oci_layout


def _layer(path: Path, content: bytes) -> Path:
    path.write_bytes(gzip.compress(content, mtime=0))
    return path


def _blob(directory: Path, digest: str) -> bytes:
    return (directory / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()


def _write(directory: Path, layers: list[Path], platform: str = "linux/arm64/v8") -> str:
    return oci_layout.write(
        directory, layers, labels={"b": "2", "a": "1"}, platform=platform, user="65532"
    )


def test_the_layout_names_its_image_and_every_blob_by_content(tmp_path: Path) -> None:
    layers = [_layer(tmp_path / "1.tar.gz", b"runtime"), _layer(tmp_path / "2.tar.gz", b"mod")]
    digest = _write(tmp_path / "out", layers)

    out = tmp_path / "out"
    index = json.loads((out / "index.json").read_text())
    assert [m["digest"] for m in index["manifests"]] == [digest]
    assert json.loads((out / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    for blob in (out / "blobs" / "sha256").iterdir():
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    manifest = json.loads(_blob(out, digest))
    assert manifest["mediaType"] == oci_layout.MANIFEST_TYPE
    assert [layer["size"] for layer in manifest["layers"]] == [p.stat().st_size for p in layers]
    config = json.loads(_blob(out, manifest["config"]["digest"]))
    assert (config["os"], config["architecture"], config["variant"]) == ("linux", "arm64", "v8")
    assert config["config"] == {"Labels": {"a": "1", "b": "2"}, "User": "65532"}
    uncompressed = [b"runtime", b"mod"]
    assert config["rootfs"]["diff_ids"] == [
        f"sha256:{hashlib.sha256(content).hexdigest()}" for content in uncompressed
    ]


def test_the_same_inputs_make_the_same_digest_and_any_change_another(tmp_path: Path) -> None:
    layers = [_layer(tmp_path / "1.tar.gz", b"runtime")]
    first = _write(tmp_path / "a", layers)
    assert _write(tmp_path / "b", layers) == first
    assert _write(tmp_path / "c", layers, platform="linux/amd64") != first
    other = [_layer(tmp_path / "2.tar.gz", b"runtime, changed")]
    assert _write(tmp_path / "d", other) != first
