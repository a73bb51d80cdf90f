"""`captf lint image`'s reading: an image from its registry into `ImageFacts`, and its
module's files into a directory the module checks read.

The image is read through controller/image/fetch.py (crane; every manifest and blob
checked against its digest), its layers into an in-memory tree (controller/image/
tree.py): nothing of it is unpacked on disk but the module's own files. A registry
that fails (no such image, 401, unreachable) raises `FetchFailed`; an image whose
content cannot be read, `ImageUnreadable`."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from controller.image.fetch import Crane, FetchFailed, is_index, platform_entry
from controller.image.tree import Tree, TreeRefused
from controller.lint.image_rules import (
    LABEL_RUNTIME,
    MODULE,
    ImageFacts,
    Kind,
    resolve,
)
from controller.lint.providers import OPENTOFU_REGISTRY, TERRAFORM_REGISTRY
from runtime.jsonobj import Json

DEFAULT_PLATFORM = "linux/amd64"


class ImageUnreadable(Exception):
    """The image was fetched but is not one this can read: a layer that is no tar, a
    config that is no JSON, more module content than the cap."""


@dataclass(frozen=True)
class ReadImage:
    digest: str
    facts: ImageFacts
    # The module's files (path under /captf/module -> content), links followed.
    module: dict[str, bytes]
    # The index has no manifest for the platform: nothing else could be read.
    platform_missing: bool = False


def name_of(reference: str) -> str:
    """`host/repo:tag@sha256:...` -> `host/repo`, what blobs are addressed under."""
    rest = reference.split("@", 1)[0]
    head, _, last = rest.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


async def read_image(crane: Crane, reference: str, platform: str | None) -> ReadImage:
    """The image `reference` points at. `platform`: the one asked for, or None (an index
    is then read for linux/amd64, a single image as it is)."""
    name = name_of(reference)
    _, _, pinned = reference.partition("@")
    digest = pinned or await crane.digest(reference)
    manifest = await crane.verified_manifest(name, digest)
    checked = platform or DEFAULT_PLATFORM
    if is_index(manifest):
        try:
            entry = platform_entry(manifest, checked, image=reference)
        except FetchFailed:
            missing = f"the index has no image for {checked}"
            facts = ImageFacts(entries={}, platform=checked, platform_problem=missing)
            return ReadImage(digest, facts, {}, platform_missing=True)
        manifest = await crane.verified_manifest(name, str(entry["digest"]))
    if "config" not in manifest:
        raise ImageUnreadable(f"{reference}: the manifest has no config")
    with tempfile.TemporaryDirectory(prefix="captf-lint-image-") as scratch:
        config = _config(await crane.verified_blob(name, manifest["config"], Path(scratch) / "c"))
        tree = Tree(keep=_in_module)
        for layer in manifest.get("layers") or []:
            blob = await crane.verified_blob(name, layer, Path(scratch) / "layer")
            try:
                tree.apply(blob)
            except TreeRefused as refused:
                raise ImageUnreadable(f"{reference}: {refused}") from None
            blob.unlink()
    own = f"{config.get('os', '')}/{config.get('architecture', '')}"
    facts = ImageFacts(
        entries=tree.entries,
        labels=_labels(config),
        user=str((config.get("config") or {}).get("User") or ""),
        platform=checked if platform or is_index(manifest) else own,
        platform_problem=f"the image is for {own}, not {platform}"
        if platform and own != platform
        else None,
    )
    return ReadImage(digest, facts, _module_files(tree))


def default_host(facts: ImageFacts) -> str:
    """The registry a provider source without a host means, by the runtime label."""
    return (
        TERRAFORM_REGISTRY if facts.labels.get(LABEL_RUNTIME) == "terraform" else OPENTOFU_REGISTRY
    )


def write_module(files: dict[str, bytes], into: Path) -> None:
    """The module's files under `into`, as the image has them under /captf/module."""
    for path, data in sorted(files.items()):
        target = into / PurePosixPath(path).relative_to(MODULE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _in_module(path: str) -> bool:
    return path.startswith(MODULE + "/")


def _module_files(tree: Tree) -> dict[str, bytes]:
    """The module's regular files, a link replaced by the file it ends at when that is
    inside the module (a link that is not is a finding, not a file)."""
    files: dict[str, bytes] = {}
    for path, entry in tree.entries.items():
        if not _in_module(path):
            continue
        end = resolve(tree.entries, path) if entry.kind is Kind.SYMLINK else path
        if end is not None and _in_module(end) and tree.entries[end].kind is Kind.FILE:
            files[path] = tree.contents.get(end, b"")
    return files


def _config(path: Path) -> Json:
    try:
        config = json.loads(path.read_bytes())
    except ValueError:
        raise ImageUnreadable("the image's config is not JSON") from None
    if not isinstance(config, dict):
        raise ImageUnreadable("the image's config is not a JSON object")
    return config


def _labels(config: Json) -> dict[str, str]:
    labels = (config.get("config") or {}).get("Labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
