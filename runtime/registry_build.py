"""Where distribution's `registry` and go-containerregistry's `crane` are built
(hack/registry/build.sh, cached): the lookups of the controller and the image tools
need crane without the test cluster (runtime.envtest.registry runs the registry)."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.builds import BuildFailed, built_dir

BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "registry" / "build.sh"


class RegistryMissing(Exception):
    """No registry build: hack/registry/build.sh has not run (or failed)."""


def registry_dir(*, build: bool = True) -> Path:
    """The directory with `registry` and `crane`; without `build`, only an existing build."""
    try:
        directory = built_dir(BUILD_SCRIPT, build=build)
    except BuildFailed as failed:
        raise RegistryMissing(str(failed)) from None
    for name in ("registry", "crane"):
        if not os.access(directory / name, os.X_OK):
            raise RegistryMissing(f"{name} not found in {directory} (from {BUILD_SCRIPT})")
    return directory
