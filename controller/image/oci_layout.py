"""A module image as an OCI image layout on disk: its layers, its config (labels,
platform, user) and its manifest, written before anything is pushed.

Why a layout: pushed in one step (crane.py), the tag moves once, from the old image
straight to the new. Built remotely in two steps (append the layers under the tag, then
set the labels and push again under it), the tag named a half-made image between them,
and a controller following the tag could apply that image, then the finished one: two
applies for one build, in every object following the tag.

The same layers, labels, platform and user make the same bytes, so the same digest:
every time in the config is the zero time, as crane writes it."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MANIFEST_TYPE: Final = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE: Final = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE: Final = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX_TYPE: Final = "application/vnd.oci.image.index.v1+json"
ZERO_TIME: Final = "0001-01-01T00:00:00Z"


@dataclass(frozen=True)
class Blob:
    media_type: str
    digest: str  # sha256:<hex>
    size: int

    def descriptor(self) -> dict[str, object]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def write(
    directory: Path,
    layers: Sequence[Path],
    *,
    labels: Mapping[str, str],
    platform: str,
    user: str,
) -> str:
    """Writes the image of `layers` (gzipped tarballs, in order) as an OCI layout in
    `directory` (empty or absent); returns the manifest's digest."""
    blobs = directory / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    written = [_layer_blob(layer, blobs) for layer in layers]
    config = config_of([diff_id(layer) for layer in layers], labels, platform, user)
    config_blob = _json_blob(config, CONFIG_TYPE, blobs)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": config_blob.descriptor(),
        "layers": [blob.descriptor() for blob in written],
    }
    manifest_blob = _json_blob(manifest, MANIFEST_TYPE, blobs)
    index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [manifest_blob.descriptor()]}
    (directory / "index.json").write_bytes(_canonical(index))
    (directory / "oci-layout").write_bytes(_canonical({"imageLayoutVersion": "1.0.0"}))
    return manifest_blob.digest


def config_of(
    diff_ids: Sequence[str], labels: Mapping[str, str], platform: str, user: str
) -> dict[str, object]:
    """The image config: `platform` as os/architecture[/variant]."""
    os_name, architecture, *variant = platform.split("/")
    config: dict[str, object] = {
        "architecture": architecture,
        "os": os_name,
        "created": ZERO_TIME,
        "config": {"Labels": dict(sorted(labels.items())), "User": user},
        "rootfs": {"type": "layers", "diff_ids": list(diff_ids)},
        "history": [{"created": ZERO_TIME} for _ in diff_ids],
    }
    if variant:
        config["variant"] = variant[0]
    return config


_DIFF_IDS: dict[tuple[str, int, int], str] = {}


def diff_id(layer: Path) -> str:
    """The sha256 of the layer uncompressed, remembered by path, size and mtime for this
    process: the runtime's layer, the same in every image, is read once."""
    stat = layer.stat()
    seen = (str(layer.resolve()), stat.st_size, stat.st_mtime_ns)
    if seen not in _DIFF_IDS:
        with gzip.open(layer, "rb") as data:
            _DIFF_IDS[seen] = f"sha256:{hashlib.file_digest(data, 'sha256').hexdigest()}"
    return _DIFF_IDS[seen]


def _layer_blob(layer: Path, blobs: Path) -> Blob:
    with layer.open("rb") as data:
        digest = hashlib.file_digest(data, "sha256")
    target = blobs / digest.hexdigest()
    if not target.exists():
        try:
            os.link(layer, target)  # the runtime's layer is large: no copy when it can
        except OSError:
            shutil.copyfile(layer, target)
    return Blob(LAYER_TYPE, f"sha256:{digest.hexdigest()}", layer.stat().st_size)


def _json_blob(content: Mapping[str, object], media_type: str, blobs: Path) -> Blob:
    data = _canonical(content)
    hexdigest = hashlib.sha256(data).hexdigest()
    (blobs / hexdigest).write_bytes(data)
    return Blob(media_type, f"sha256:{hexdigest}", len(data))


def _canonical(content: Mapping[str, object]) -> bytes:
    return json.dumps(content, separators=(",", ":"), sort_keys=True).encode()
