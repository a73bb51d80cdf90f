"""Building a module image: the layer tarball of layout.members, the runtime's version
for the labels, and the push (crane.py)."""

from __future__ import annotations

import gzip
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

from controller.core.contract.roles import Role
from controller.image import crane, layout
from controller.lint.module_files import ModuleUnreadable
from controller.lint.providers import required_providers


class BuildError(Exception):
    """The image cannot be built: a missing input, an unusable runtime, a failed push."""


def build_and_push(
    module: Path, role: Role, tag: str, *, runtime: Path, providers: Path | None
) -> str:
    """Builds the image from `module`, `runtime` and `providers`, pushes it as `tag` and
    returns its digest."""
    if not module.is_dir():
        raise BuildError(f"{module} is not a directory")
    if not runtime.is_file():
        raise BuildError(f"no runtime at {runtime}")
    if providers is not None and not providers.is_dir():
        raise BuildError(f"{providers} is not a directory")
    version = runtime_version(runtime)
    members = layout_of(module, runtime, providers)
    with tempfile.TemporaryDirectory(prefix="captf-image-") as scratch:
        layer = Path(scratch) / "layer.tar.gz"
        write_layer(layer, members)
        try:
            path = crane.crane_path()
            labels = layout.labels(role, version)
            return crane.push(
                path, layer, tag, labels=labels, platform=layout.platform_of(), user=layout.USER
            )
        except crane.CraneFailed as failed:
            raise BuildError(str(failed)) from None


def layout_of(module: Path, runtime: Path, providers: Path | None) -> list[layout.Member]:
    """The layer's members: the mirror cut down to the providers the module and its local
    modules require."""
    try:
        required = required_providers(module) if providers is not None else frozenset()
        return layout.members(module, runtime, providers, required)
    except ModuleUnreadable as err:
        where = f"{module / err.file}{f':{err.line}' if err.line else ''}" if err.file else module
        raise BuildError(f"{where}: {err.message}") from None
    except layout.MirrorLacks as lacks:
        raise BuildError(str(lacks)) from None


def write_layer(path: Path, members: list[layout.Member]) -> None:
    """A gzipped tar of `members`, owned by root, dated the epoch (the gzip header too,
    which names no file): the same members make the same bytes, whoever builds them and
    when. Compressed fast: the runtime is most of it, and level 9 takes 14 times as long
    (24 s against 1.7 s for OpenTofu's 115 MB) for 13% less."""
    with (
        path.open("wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0, compresslevel=1) as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for member in members:
            info = tarfile.TarInfo(str(member.name))
            info.mode, info.mtime, info.uid, info.gid = member.mode, 0, 0, 0
            if member.source is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            info.size = member.source.stat().st_size
            with member.source.open("rb") as data:
                tar.addfile(info, data)


def runtime_version(runtime: Path) -> str:
    """The runtime's version, as `tofu version -json` reports it."""
    try:
        done = subprocess.run(
            [str(runtime), "version", "-json"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            env={"CHECKPOINT_DISABLE": "1"},
        )
        version = json.loads(done.stdout).get("terraform_version")
    except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError) as exc:
        raise BuildError(f"{runtime} does not report its version: {exc}") from None
    if not isinstance(version, str) or not version:
        raise BuildError(f"{runtime} does not report its version")
    return version
