"""What a module image holds, as data: its layers' members and its labels.

The image contract (docs/module-image.md): the role module under `captf/module/`,
OpenTofu at `captf/runtime`, an optional filesystem provider mirror under
`captf/providers/`, and four labels saying which contract, role and runtime it carries.
The mirror holds only the providers the module requires (`HOST/NAMESPACE/TYPE`
directories of the mirror given, packed or unpacked alike); one the mirror lacks for
the image's platform is `MirrorLacks`.
Up to three layers hold it: the runtime's, the same for every module, the mirror's, the
same for every module requiring the same providers, then the module's; members are
listed in a fixed order with fixed modes so the same inputs make the same layers."""

from __future__ import annotations

import platform
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from controller.core.contract.roles import CONTRACT_VERSION, Role

ROOT: Final = PurePosixPath("captf")
MODULE: Final = ROOT / "module"
RUNTIME: Final = ROOT / "runtime"
PROVIDERS: Final = ROOT / "providers"
RUNTIME_NAME: Final = "tofu"
# Files any user can read, directories any user can enter: the runner's user is not the
# image's. Executables (the runtime, provider binaries) any user can run.
DIR_MODE: Final = 0o755
FILE_MODE: Final = 0o644
EXEC_MODE: Final = 0o755
# The image's USER: numeric and not root, so a Job may run it under the restricted Pod
# Security profile (the runner's own user decides here; every file is world-readable).
USER: Final = "65532"
# Never part of a module: a local init's directory, state, a repository's history.
_SKIPPED_DIRS: Final = frozenset({".terraform", ".git"})


class MirrorLacks(Exception):
    """The module requires a provider the mirror has no package of for the platform."""


@dataclass(frozen=True, slots=True)
class Member:
    """One entry of the layer: its name in the tar, its source file (None: a directory)
    and its mode."""

    name: PurePosixPath
    source: Path | None
    mode: int


def labels(role: Role, runtime_version: str) -> dict[str, str]:
    """The image's labels: metadata only, the runner never reads them."""
    return {
        "io.captf.contract": CONTRACT_VERSION,
        "io.captf.role": role.value,
        "io.captf.runtime": RUNTIME_NAME,
        "io.captf.runtime.version": runtime_version,
    }


def members(
    module: Path,
    runtime: Path,
    providers: Path | None,
    required: Collection[str] = frozenset(),
    *,
    platform: str = "",
) -> list[Member]:
    """The image's members, parents before children, in name order. `required`: the
    providers (`host/namespace/type`) the module requires, the only ones taken from
    the mirror `providers`."""
    found = [Member(ROOT, None, DIR_MODE)]
    found += _tree(module, MODULE, skip=_skipped)
    found.append(Member(RUNTIME, runtime, EXEC_MODE))
    if providers is not None:
        found += mirror_members(providers, required, platform or platform_of())
    return found


def split(members: list[Member]) -> tuple[list[Member], ...]:
    """The runtime's layer (`captf/` and the runtime), the providers' (`captf/` again and
    the mirror) when the mirror holds a provider, and the module's (`captf/` and the rest).
    The runtime's is the same for every module, and the providers' for every module
    requiring the same providers: the roles of one module set share both, so a registry
    holds a 905 MB provider once (and a client pushes it once) however many images carry
    it. A module requiring none keeps its empty `captf/providers/` in its own layer."""
    runtime = [m for m in members if m.name in (ROOT, RUNTIME)]
    providers = [m for m in members if m.name == ROOT or m.name.is_relative_to(PROVIDERS)]
    if not any(m.name.parent.is_relative_to(PROVIDERS) for m in providers):
        return runtime, [m for m in members if m.name != RUNTIME]
    module = [m for m in members if m.name == ROOT or m.name.is_relative_to(MODULE)]
    return runtime, providers, module


def mirror_members(mirror: Path, required: Collection[str], platform: str) -> list[Member]:
    """`captf/providers/` with the required providers' directories of `mirror` and their
    parents; an empty directory when the module requires none (the runner then installs
    nothing from anywhere but it)."""
    target = platform.replace("/", "_")
    lacking = [address for address in sorted(required) if not has_package(mirror, address, target)]
    if lacking:
        raise MirrorLacks(
            f"the module requires {', '.join(lacking)}, which the provider mirror {mirror}"
            f" has no {target} package of"
        )
    found = [Member(PROVIDERS, None, DIR_MODE)]
    parents: set[PurePosixPath] = set()
    for address in sorted(required):
        into = PROVIDERS / address
        for parent in reversed(into.parents):
            if parent.is_relative_to(PROVIDERS) and parent != PROVIDERS and parent not in parents:
                parents.add(parent)
                found.append(Member(parent, None, DIR_MODE))
        found += _tree(mirror / address, into, skip=lambda _: False)
    return found


def has_package(mirror: Path, address: str, target: str) -> bool:
    """Whether the mirror holds a package of `address` for `target` (`linux_amd64`):
    unpacked, `VERSION/TARGET/` with a file in it, or packed, `*_TARGET.zip`."""
    top = mirror / address
    unpacked = any(
        path.is_file() for version in top.glob("*") for path in (version / target).glob("*")
    )
    return unpacked or any(top.glob(f"terraform-provider-*_{target}.zip"))


def platform_of(machine: str | None = None) -> str:
    """This machine's OCI platform (`linux/amd64`): the runtime and providers built here
    run only on it."""
    arch = (machine or platform.machine()).lower()
    return "linux/" + {"x86_64": "amd64", "aarch64": "arm64"}.get(arch, arch)


def _tree(
    top: Path, into: PurePosixPath, *, skip: Callable[[tuple[str, ...]], bool]
) -> list[Member]:
    found = [Member(into, None, DIR_MODE)]
    for path in sorted(top.rglob("*")):
        relative = path.relative_to(top)
        if skip(relative.parts) or path.is_symlink():
            continue
        name = into.joinpath(*relative.parts)
        if path.is_dir():
            found.append(Member(name, None, DIR_MODE))
        elif path.is_file():
            mode = EXEC_MODE if path.stat().st_mode & 0o111 else FILE_MODE
            found.append(Member(name, path, mode))
    return found


def _skipped(parts: tuple[str, ...]) -> bool:
    if any(part in _SKIPPED_DIRS for part in parts):
        return True
    name = parts[-1] if parts else ""
    return name.endswith(".tfstate") or ".tfstate." in name
