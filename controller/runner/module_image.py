"""A module image mounted into the runner's pod (spec.source.image): where the runner
finds the module, OpenTofu and the provider mirror.

The Job mounts the image read-only and names the mount in RunnerVar.MODULE_IMAGE_DIR.
The image contract's fixed paths under it: `module/` (required: the role module, with
any local module it calls), `runtime` (OpenTofu; absent, the runner's own), `providers/`
(a filesystem mirror; absent, the runner's own CLI configuration). Labels are metadata
and never read here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from controller.core.basics.runner_vars import RunnerVar

MODULE = "module"
RUNTIME = "runtime"
PROVIDERS = "providers"
# Written into the run's work directory when the image ships a provider mirror.
CLI_CONFIG_FILE = "module-image.tofurc"
# A module has at least one configuration file at its top level.
_CONFIG_SUFFIXES = (".tf", ".tf.json", ".tofu", ".tofu.json")


class ImageLayoutError(ValueError):
    """The module image (or its mount) does not follow the image contract."""


def tofu_of(
    image_dir: str | None, tofu: str, cli_config: str | None, work_dir: Path
) -> tuple[str, str | None]:
    """The tofu binary and CLI configuration to run with: the image's runtime and
    mirror where it ships them, else the runner's own (`tofu`, `cli_config`). A mirror's
    configuration installs every provider from it alone, so a run never reaches out."""
    if image_dir is None:
        return tofu, cli_config
    mount = Path(image_dir)
    runtime = mount / RUNTIME
    binary = str(runtime) if runtime.is_file() else tofu
    providers = mount / PROVIDERS
    if not providers.is_dir():
        return binary, cli_config
    config = work_dir / CLI_CONFIG_FILE
    config.write_text(mirror_config(providers))
    return binary, str(config)


def mirror_config(providers: Path) -> str:
    """The CLI configuration that installs providers from the filesystem mirror only."""
    path = json.dumps(str(providers))  # an HCL string literal: JSON's escapes are HCL's
    return f"provider_installation {{\n  filesystem_mirror {{\n    path = {path}\n  }}\n}}\n"


def copy_module(
    reference: str, image_dir: str | None, target: Path, reserved: frozenset[str]
) -> None:
    """Copies the image's module/ tree into `target` (which exists), files only: modes
    and ownership of the read-only image are not carried over, so tofu can write beside
    them. `reserved` are top-level names the runner writes itself."""
    if image_dir is None:
        raise ImageLayoutError(
            f"the inputs name the module image {reference}, but this runner's pod mounts no "
            f"module image ({RunnerVar.MODULE_IMAGE_DIR} is not set): the Job was built by "
            "a controller or for a runner that cannot run an image source"
        )
    source = Path(image_dir) / MODULE
    if not source.is_dir():
        raise ImageLayoutError(f"the module image {reference} has no {MODULE}/ directory")
    top = {entry.name for entry in source.iterdir()}
    if not any(name.endswith(_CONFIG_SUFFIXES) for name in top):
        raise ImageLayoutError(
            f"the module image {reference} has no .tf or .tofu file at the top of {MODULE}/"
        )
    clash = sorted(top & reserved)
    if clash:
        raise ImageLayoutError(f"the module image {reference} ships {clash[0]!r}, a runner's file")
    for path in sorted(source.rglob("*")):
        if path.is_file():
            destination = target / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
