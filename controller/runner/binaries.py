"""Where tofu and the provider mirror come from: $CAPTF_TOFU_DIR, else hack/tofu/build.sh.

build.sh builds OpenTofu and the `local` provider from Go modules once per
version and afterwards only prints the cached directory. The directory holds
`tofu`, the filesystem mirror, and `tofurc` (the CLI config naming the mirror)."""

from __future__ import annotations

import os
from pathlib import Path

from controller.core.basics.runner_vars import RunnerVar
from runtime.builds import BuildFailed, built_dir

DIR_ENV = "CAPTF_TOFU_DIR"
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "tofu" / "build.sh"


class TofuMissing(Exception):
    pass


def tofu_dir(*, build: bool = True) -> Path:
    """The build directory; without `build`, only an existing build is accepted.

    Raises TofuMissing saying what is missing."""
    explicit = os.environ.get(DIR_ENV)
    directory = Path(explicit) if explicit else _from_script(build)
    for name in ("tofu", "tofurc"):
        if not (directory / name).is_file():
            source = f"${DIR_ENV}" if explicit else str(BUILD_SCRIPT)
            raise TofuMissing(f"{name} not found in {directory} (from {source})")
    return directory


def runner_environ(directory: Path) -> dict[str, str]:
    """The runner's variables that point it at this build."""
    return {
        RunnerVar.TOFU.value: str(directory / "tofu"),
        RunnerVar.TOFU_CLI_CONFIG.value: str(directory / "tofurc"),
    }


def _from_script(build: bool) -> Path:
    if not BUILD_SCRIPT.is_file():
        raise TofuMissing(f"no ${DIR_ENV} and no build script at {BUILD_SCRIPT}")
    try:
        return built_dir(BUILD_SCRIPT, build=build)
    except BuildFailed as failed:
        raise TofuMissing(str(failed)) from None
