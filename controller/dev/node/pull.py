"""Pulling images from a registry into the node's image cache, keyed by digest.

The registry protocol is go-containerregistry's `crane`, run as a subprocess (built
from Go modules by hack/registry/build.sh): `crane digest` resolves a tag,
`crane manifest` and `crane blob` fetch by digest. Nothing crane returns is
trusted: the manifest, the config and every layer are hashed here and compared
with the digest they were asked for, and a layer's size with its descriptor.

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
import platform
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from controller.dev.node.layers import LayerRefused, make_read_only, make_writable, unpack_layer
from controller.dev.node.reference import (
    NEVER,
    BadReference,
    Reference,
    needs_pull,
    parse_reference,
)

Json = dict[str, Any]

CRANE_TIMEOUT_SECONDS = 300.0
_INDEXES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


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
            crane = _Crane(self._crane, docker_config)
            digest = ref.digest or await crane.text("digest", str(ref))
            # A digest already cached needs nothing more; one named by the reference
            # itself did not even need the registry.
            asked = not ref.digest
            if not self._image_dir(digest).is_dir():
                await self._fetch(crane, ref, digest)
                asked = True
            self._remember(ref, digest)
            return Pulled(digest, self._image_dir(digest) / "rootfs", pulled=asked)

    def _cached(self, ref: Reference) -> str | None:
        digest = ref.digest or _read(self._ref_file(ref))
        return digest if digest and self._image_dir(digest).is_dir() else None

    async def _fetch(self, crane: _Crane, ref: Reference, digest: str) -> None:
        self._cache.joinpath("images").mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".pull-", dir=self._cache / "images"))
        try:
            manifest = await self._manifest(crane, ref, digest)
            await crane.verified_blob(ref, manifest["config"], staging / "config.json")
            rootfs = staging / "rootfs"
            rootfs.mkdir()
            for layer in manifest.get("layers") or []:
                blob = await crane.verified_blob(ref, layer, staging / "layer")
                await anyio.to_thread.run_sync(_unpack, blob, rootfs)
                blob.unlink()
            await anyio.to_thread.run_sync(_seal, staging, manifest, self._image_dir(digest))
        finally:
            await anyio.to_thread.run_sync(_remove_tree, staging)

    async def _manifest(self, crane: _Crane, ref: Reference, digest: str) -> Json:
        manifest = await crane.verified_manifest(ref, digest)
        if manifest.get("mediaType") in _INDEXES or "manifests" in manifest:
            chosen = _platform_manifest(manifest, image=str(ref))
            manifest = await crane.verified_manifest(ref, str(chosen["digest"]))
        if "config" not in manifest:
            raise PullFailed(f"{ref.at(digest)}: the manifest has no config")
        return manifest

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


class _Crane:
    """crane for one pull: `DOCKER_CONFIG` is always set (to the pull's credentials, else
    an empty directory), so the node user's own registry logins are never used."""

    def __init__(self, binary: Path | None, docker_config: Path | None) -> None:
        if binary is None:
            raise PullFailed("no crane build to pull with (run hack/registry/build.sh)")
        self._binary = binary
        self._config = docker_config

    async def text(self, *args: str) -> str:
        return (await self._run(args)).decode().strip()

    async def verified_manifest(self, ref: Reference, digest: str) -> Json:
        raw = await self._run(("manifest", ref.at(digest)))
        _check(raw, digest, f"manifest {ref.at(digest)}")
        manifest: Json = json.loads(raw)
        return manifest

    async def verified_blob(self, ref: Reference, descriptor: Json, into: Path) -> Path:
        digest = str(descriptor["digest"])
        with into.open("wb") as out:
            await self._run(("blob", ref.at(digest)), stdout=out)
        size, got = await anyio.to_thread.run_sync(_file_digest, into)
        if "size" in descriptor and size != int(descriptor["size"]):
            raise PullFailed(
                f"blob {ref.at(digest)}: {size} bytes, descriptor says {descriptor['size']}"
            )
        if got != digest:
            raise PullFailed(f"blob {ref.at(digest)}: content has digest {got}")
        return into

    async def _run(self, args: Sequence[str], stdout: Any = None) -> bytes:
        with tempfile.TemporaryDirectory(prefix="captf-crane-") as empty:
            env = {"DOCKER_CONFIG": str(self._config or empty), "HOME": empty}
            argv = [str(self._binary), *args]
            try:
                with anyio.fail_after(CRANE_TIMEOUT_SECONDS):
                    done = await anyio.run_process(
                        argv, stdout=stdout if stdout is not None else -1, check=False, env=env
                    )
            except TimeoutError:
                raise PullFailed(
                    f"crane {args[0]} {args[-1]}: no answer in {CRANE_TIMEOUT_SECONDS:g}s"
                ) from None
        if done.returncode != 0:
            said = (done.stderr or b"").decode(errors="replace").strip().splitlines()
            raise PullFailed(f"crane {args[0]} {args[-1]}: {said[-1] if said else done.returncode}")
        return done.stdout or b""


def _platform_manifest(index: Json, *, image: str) -> Json:
    arch = _ARCH.get(platform.machine(), platform.machine())
    for entry in index.get("manifests") or []:
        found = entry.get("platform") or {}
        if found.get("os") == "linux" and found.get("architecture") == arch:
            return dict(entry)
    raise PullFailed(f"{image}: no linux/{arch} image in the index")


def _check(raw: bytes, digest: str, what: str) -> None:
    got = "sha256:" + hashlib.sha256(raw).hexdigest()
    if got != digest:
        raise PullFailed(f"{what}: content has digest {got}")


def _file_digest(path: Path) -> tuple[int, str]:
    """The file's size and digest."""
    with path.open("rb") as source:
        digest = "sha256:" + hashlib.file_digest(source, "sha256").hexdigest()
    return path.stat().st_size, digest


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
