"""Where kube-apiserver, kube-controller-manager and etcd come from: $CAPTF_KUBE_BIN_DIR,
else hack/kube/build.sh.

build.sh builds them from Go modules once per version and afterwards only
prints the cached directory, so calling it on every start costs milliseconds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
    if not BUILD_SCRIPT.is_file():
        raise BinariesMissing(f"no {BIN_DIR_ENV} and no build script at {BUILD_SCRIPT}")
    done = subprocess.run(
        [str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise BinariesMissing(f"{BUILD_SCRIPT} failed with exit status {done.returncode}")
    return Path(lines[-1])
