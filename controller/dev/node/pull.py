"""Pulling images from a registry into the node's image cache, keyed by digest.

The registry protocol is go-containerregistry's `crane`, run as a subprocess (built
from Go modules by hack/registry/build.sh) through controller/image/fetch.py:
`crane digest` resolves a tag, `crane manifest` and `crane blob` fetch by digest.
Nothing crane returns is trusted: the manifest, the config and every layer are
hashed and compared with the digest they were asked for, and a layer's size with
its descriptor.

    <cache>/images/sha256-<hex>/rootfs        the layers, applied in order, read-only
    <cache>/images/sha256-<hex>/manifest.json
    <cache>/images/sha256-<hex>/config.json
    <cache>/refs/<sha256 of the reference>    the digest the reference last resolved to

An image directory appears whole (unpacked beside it, then renamed) or not at all,
so a present directory is a complete, verified image. The key is the digest the
reference resolved to (an index's, when the registry serves an index; the platform's
manifest in it is then the one unpacked). Pulls of one reference are serialized."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from controller.dev.node.layers import LayerRefused, make_read_only, make_writable, unpack_layer
from controller.dev.node.reference import (
    NEVER,
    BadReference,
    Reference,
    needs_pull,
    parse_reference,
)
from controller.image.fetch import Crane, FetchFailed
from controller.image.layout import platform_of
from runtime.jsonobj import Json

CRANE_TIMEOUT_SECONDS = 300.0


class PullFailed(Exception):
    """The image could not be had; `reason` is the kubelet's for the container's state."""

    def __init__(self, message: str, reason: str = "ErrImagePull") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Pulled:
    digest: str
    rootfs: Path
    pulled: bool  # False when the cache answered without asking the registry


class Puller:
    """The node's image cache and its one way in; see the module's docstring. `crane` is
    None when there is no build: every pull then fails, saying so."""

    def __init__(self, cache: Path, crane: Path | None) -> None:
        self._cache = cache
        self._crane = crane
        self._locks: dict[str, anyio.Lock] = {}

    async def pull(self, image: str, policy: str, docker_config: Path | None = None) -> Pulled:
        """The image's root directory, pulled as `policy` says. `docker_config`: a
        directory with a `config.json` of registry credentials."""
        try:
            ref = parse_reference(image)
        except BadReference as exc:
            raise PullFailed(str(exc), "InvalidImageName") from None
        lock = self._locks.setdefault(str(ref), anyio.Lock())
        async with lock:
            cached = self._cached(ref)
            if not needs_pull(policy, cached is not None):
                if cached is None:
                    message = f'image "{image}" is not present with pull policy of {NEVER}'
                    raise PullFailed(message, "ErrImageNeverPull")
                return Pulled(cached, self._image_dir(cached) / "rootfs", pulled=False)
            async with _fetching():
                crane = self._crane_for(docker_config)
                digest = ref.digest or await crane.digest(str(ref))
                # A digest already cached needs nothing more; one named by the reference
                # itself did not even need the registry.
                asked = not ref.digest
                if not self._image_dir(digest).is_dir():
                    await self._fetch(crane, ref, digest)
                    asked = True
            self._remember(ref, digest)
            return Pulled(digest, self._image_dir(digest) / "rootfs", pulled=asked)

    def _crane_for(self, docker_config: Path | None) -> Crane:
        """crane for one pull: `DOCKER_CONFIG` is always set (to the pull's credentials, else
        an empty directory), so the node user's own registry logins are never used."""
        if self._crane is None:
            raise PullFailed("no crane build to pull with (run hack/registry/build.sh)")
        return Crane(self._crane, docker_config, own_logins=False, timeout=CRANE_TIMEOUT_SECONDS)

    def _cached(self, ref: Reference) -> str | None:
        digest = ref.digest or _read(self._ref_file(ref))
        return digest if digest and self._image_dir(digest).is_dir() else None

    async def _fetch(self, crane: Crane, ref: Reference, digest: str) -> None:
        self._cache.joinpath("images").mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".pull-", dir=self._cache / "images"))
        try:
            manifest = await crane.image_manifest(ref.name, digest, platform_of())
            await crane.verified_blob(ref.name, manifest["config"], staging / "config.json")
            rootfs = staging / "rootfs"
            rootfs.mkdir()
            for layer in manifest.get("layers") or []:
                blob = await crane.verified_blob(ref.name, layer, staging / "layer")
                await anyio.to_thread.run_sync(_unpack, blob, rootfs)
                blob.unlink()
            await anyio.to_thread.run_sync(_seal, staging, manifest, self._image_dir(digest))
        finally:
            await anyio.to_thread.run_sync(_remove_tree, staging)

    def _remember(self, ref: Reference, digest: str) -> None:
        path = self._ref_file(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(digest)
        tmp.replace(path)

    def _image_dir(self, digest: str) -> Path:
        return self._cache / "images" / digest.replace(":", "-")

    def _ref_file(self, ref: Reference) -> Path:
        return self._cache / "refs" / hashlib.sha256(str(ref).encode()).hexdigest()


@asynccontextmanager
async def _fetching() -> AsyncIterator[None]:
    """crane's failures as the kubelet reports a pull's: ErrImagePull, with crane's words."""
    try:
        yield
    except FetchFailed as failed:
        raise PullFailed(failed.verbose) from None


def _seal(staging: Path, manifest: Json, into: Path) -> None:
    """Make the unpacked image read-only and put it in place, whole, under its digest."""
    (staging / "manifest.json").write_text(json.dumps(manifest))
    for name in ("manifest.json", "config.json"):
        (staging / name).chmod(0o444)
    make_read_only(staging / "rootfs")
    try:
        staging.rename(into)
    except OSError:
        # Another reference to the same digest was pulled meanwhile: its copy is as good.
        if not into.is_dir():
            raise


def _unpack(blob: Path, rootfs: Path) -> None:
    try:
        unpack_layer(blob, rootfs)
    except LayerRefused as exc:
        raise PullFailed(f"layer refused: {exc}") from None
    except (OSError, EOFError, ValueError, tarfile.TarError) as exc:
        raise PullFailed(f"layer cannot be unpacked: {exc}") from None


def _remove_tree(path: Path) -> None:
    """Remove what a failed pull left (nothing once it was renamed into place)."""
    if not path.exists():
        return
    make_writable(path)
    shutil.rmtree(path, ignore_errors=True)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""
