"""Reading an image from a registry with go-containerregistry's `crane`: the manifest (an
index resolved to one platform's), the config and the layers, each hashed here and
compared with the digest it was asked for. Shared by the process node's puller
(controller/dev/node/pull.py) and `captf lint image`; the protocol is crane's, never
written here.

Nothing crane returns is trusted: a manifest whose bytes do not hash to its digest, or
a blob whose size or digest differs from its descriptor, is refused. A failure says
which kind it is (`FetchFailed.kind`), read from crane's last error line, and a
message built from the reference alone: crane's own text can carry URLs, and a
message of ours carries nothing a credential could hide in."""

from __future__ import annotations

import enum
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from runtime.jsonobj import Json

TIMEOUT_SECONDS = 300.0
INDEXES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


class FetchKind(enum.Enum):
    NOT_FOUND = "not found"
    UNAUTHORIZED = "unauthorized"
    UNREACHABLE = "unreachable"
    REFUSED = "refused"  # content that does not match its digest, or no such platform
    FAILED = "failed"  # anything else crane reports


# Substrings of crane's error line, first match wins: the registry's error codes
# (distribution spec), then what Go's net package says of a dead address.
_KINDS: tuple[tuple[FetchKind, tuple[str, ...]], ...] = (
    (FetchKind.UNAUTHORIZED, ("UNAUTHORIZED", "DENIED", "401 Unauthorized", "403 Forbidden")),
    (FetchKind.NOT_FOUND, ("MANIFEST_UNKNOWN", "NAME_UNKNOWN", "BLOB_UNKNOWN", "404 Not Found")),
    (
        FetchKind.UNREACHABLE,
        ("connection refused", "no such host", "i/o timeout", "dial tcp", "network is unreachable"),
    ),
)


class FetchFailed(Exception):
    """The image could not be read. `str()` is ours alone; `verbose` has crane's own last
    error line in place of the kind, for a caller that shows it as a kubelet shows a
    pull error (the node's pod status)."""

    def __init__(self, message: str, kind: FetchKind, verbose: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.verbose = verbose or message


def kind_of(said: str) -> FetchKind:
    """What kind of failure crane's error line reports."""
    for kind, needles in _KINDS:
        if any(needle in said for needle in needles):
            return kind
    return FetchKind.FAILED


@dataclass(frozen=True)
class Crane:
    """crane for one image. `docker_config`: a directory with a `config.json` of registry
    credentials. `own_logins`: without one, use the user's own (crane's default keychain);
    else crane gets an empty directory, so the user's logins are never used (the node)."""

    binary: Path
    docker_config: Path | None = None
    own_logins: bool = False
    timeout: float = TIMEOUT_SECONDS
    # Variables of this process crane also gets beside a docker_config (say, its trust
    # roots); credentials never travel this way.
    passed: tuple[str, ...] = ()

    async def digest(self, reference: str) -> str:
        return (await self._run(("digest", reference))).decode().strip()

    async def verified_manifest(self, name: str, digest: str) -> Json:
        """The manifest `name@digest`, its bytes hashed against the digest."""
        raw = await self._run(("manifest", f"{name}@{digest}"))
        check_bytes(raw, digest, f"manifest {name}@{digest}")
        manifest: Json = json.loads(raw)
        return manifest

    async def verified_blob(self, name: str, descriptor: Json, into: Path) -> Path:
        """The blob a descriptor names, written to `into`, its size and digest checked."""
        digest = str(descriptor["digest"])
        with into.open("wb") as out:
            await self._run(("blob", f"{name}@{digest}"), stdout=out)
        size, got = await anyio.to_thread.run_sync(file_digest, into)
        if "size" in descriptor and size != int(descriptor["size"]):
            raise FetchFailed(
                f"blob {name}@{digest}: {size} bytes, descriptor says {descriptor['size']}",
                FetchKind.REFUSED,
            )
        if got != digest:
            raise FetchFailed(f"blob {name}@{digest}: content has digest {got}", FetchKind.REFUSED)
        return into

    async def image_manifest(self, name: str, digest: str, platform: str) -> Json:
        """The image manifest at `digest`, through an index to `platform`'s entry when the
        digest names an index."""
        manifest = await self.verified_manifest(name, digest)
        if is_index(manifest):
            chosen = platform_entry(manifest, platform, image=f"{name}@{digest}")
            manifest = await self.verified_manifest(name, str(chosen["digest"]))
        if "config" not in manifest:
            raise FetchFailed(f"{name}@{digest}: the manifest has no config", FetchKind.REFUSED)
        return manifest

    async def _run(self, args: Sequence[str], stdout: Any = None) -> bytes:
        with tempfile.TemporaryDirectory(prefix="captf-crane-") as empty:
            if self.docker_config is not None or not self.own_logins:
                env = {"DOCKER_CONFIG": str(self.docker_config or empty), "HOME": empty}
                env |= {k: os.environ[k] for k in self.passed if k in os.environ}
            else:
                env = dict(os.environ)
            argv = [str(self.binary), *args]
            try:
                with anyio.fail_after(self.timeout):
                    done = await anyio.run_process(
                        argv, stdout=stdout if stdout is not None else -1, check=False, env=env
                    )
            except TimeoutError:
                raise FetchFailed(
                    f"crane {args[0]} {args[-1]}: no answer in {self.timeout:g}s",
                    FetchKind.UNREACHABLE,
                ) from None
            except OSError as exc:
                raise FetchFailed(f"crane {args[0]}: {exc.strerror}", FetchKind.FAILED) from None
        if done.returncode != 0:
            lines = (done.stderr or b"").decode(errors="replace").strip().splitlines()
            said = lines[-1] if lines else str(done.returncode)
            kind, what = kind_of(said), f"crane {args[0]} {args[-1]}"
            raise FetchFailed(f"{what}: {kind.value}", kind, f"{what}: {said}")
        return done.stdout or b""


def is_index(manifest: Json) -> bool:
    return manifest.get("mediaType") in INDEXES or "manifests" in manifest


def platform_entry(index: Json, platform: str, *, image: str) -> Json:
    """The index's entry for `platform` (`os/arch`)."""
    os_name, _, arch = platform.partition("/")
    for entry in index.get("manifests") or []:
        found = entry.get("platform") or {}
        if found.get("os") == os_name and found.get("architecture") == arch:
            return dict(entry)
    raise FetchFailed(f"{image}: no {platform} image in the index", FetchKind.REFUSED)


def check_bytes(raw: bytes, digest: str, what: str) -> None:
    got = "sha256:" + hashlib.sha256(raw).hexdigest()
    if got != digest:
        raise FetchFailed(f"{what}: content has digest {got}", FetchKind.REFUSED)


def file_digest(path: Path) -> tuple[int, str]:
    """The file's size and digest."""
    with path.open("rb") as source:
        digest = "sha256:" + hashlib.file_digest(source, "sha256").hexdigest()
    return path.stat().st_size, digest
