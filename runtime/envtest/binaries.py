"""Where kube-apiserver, kube-controller-manager and etcd come from: $CAPTF_KUBE_BIN_DIR,
else hack/kube/build.sh.

build.sh builds them from Go modules once per version and afterwards only
prints the cached directory, so calling it on every start costs milliseconds."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.builds import BuildFailed, built_dir

BIN_DIR_ENV = "CAPTF_KUBE_BIN_DIR"
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "kube" / "build.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")


class BinariesMissing(Exception):
    pass


def binary_dir() -> Path:
    """The directory holding the binaries, building them first if need be.

    The build's progress goes to our stderr; its last stdout line is the directory."""
    explicit = os.environ.get(BIN_DIR_ENV)
    directory = Path(explicit) if explicit else _build()
    missing = [name for name in BINARIES if not os.access(directory / name, os.X_OK)]
    if missing:
        source = f"${BIN_DIR_ENV}" if explicit else str(BUILD_SCRIPT)
        raise BinariesMissing(f"{', '.join(missing)} not found in {directory} (from {source})")
    return directory


def _build() -> Path:
    try:
        return built_dir(BUILD_SCRIPT)
    except BuildFailed as failed:
        raise BinariesMissing(f"no {BIN_DIR_ENV} and {failed}") from None
