"""Binaries built from Go modules by a cached build script (hack/<name>/build.sh): the
script builds once per version, then only prints the directory, so asking costs
milliseconds. Knows nothing of what is built."""

from __future__ import annotations

import subprocess
from pathlib import Path


class BuildFailed(Exception):
    """A build script is missing, failed, or printed no directory."""


def built_dir(script: Path, *, build: bool = True) -> Path:
    """The directory a cached build script prints on its last stdout line. With
    `build=False` the script is run with `--check`: it reports a cached build and builds
    nothing. The build's progress goes to our stderr."""
    if not script.is_file():
        raise BuildFailed(f"no build script at {script}")
    args = [str(script)] if build else [str(script), "--check"]
    done = subprocess.run(
        args,
        stdout=subprocess.PIPE,
        stderr=None if build else subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr or "").strip() if not build else f"exit status {done.returncode}"
        raise BuildFailed(f"{script}: {why}")
    return Path(lines[-1])
