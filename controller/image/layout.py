"""What a module image holds, as data: its layer's members and its labels.

The image contract (docs/module-image.md): the role module under `captf/module/`,
OpenTofu at `captf/runtime`, an optional filesystem provider mirror under
`captf/providers/`, and four labels saying which contract, role and runtime it carries.
One layer holds it all; members are listed in a fixed order with fixed modes so the
same inputs make the same layer."""

from __future__ import annotations

import platform
from collections.abc import Callable
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
# Never part of a module: a local init's directory, state, a repository's history.
_SKIPPED_DIRS: Final = frozenset({".terraform", ".git"})


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


def members(module: Path, runtime: Path, providers: Path | None) -> list[Member]:
    """The layer's members, parents before children, in name order."""
    found = [Member(ROOT, None, DIR_MODE)]
    found += _tree(module, MODULE, skip=_skipped)
    found.append(Member(RUNTIME, runtime, EXEC_MODE))
    if providers is not None:
        found += _tree(providers, PROVIDERS, skip=lambda _: False)
    return found


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
