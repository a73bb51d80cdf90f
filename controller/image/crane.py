"""Pushing a module image with go-containerregistry's `crane` (hack/registry/build.sh
builds it from Go modules): the registry protocol is crane's, never written here.

crane talks plain HTTP to loopback, localhost and private addresses, TLS elsewhere,
and takes credentials from the user's Docker config, as it decides."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.image import oci_layout
from runtime.registry_build import RegistryMissing, registry_dir

TIMEOUT_SECONDS = 300.0


class CraneFailed(Exception):
    """crane is missing, or a call of it failed: the message says which and why."""


def crane_path() -> Path:
    """The cached crane (building it on first use)."""
    try:
        return registry_dir() / "crane"
    except RegistryMissing as missing:
        raise CraneFailed(str(missing)) from None


def push(
    crane: Path,
    layers: Sequence[Path],
    tag: str,
    *,
    labels: Mapping[str, str],
    platform: str,
    user: str,
) -> str:
    """Pushes the image of `layers` with its labels, platform and user as `tag`, in one
    step from an OCI layout (oci_layout.py: the tag never names a half-made image).
    Returns the digest. A layer the registry holds already is not uploaded again (crane
    asks first)."""
    with tempfile.TemporaryDirectory(prefix="captf-oci-") as scratch:
        directory = Path(scratch)
        digest = oci_layout.write(directory, layers, labels=labels, platform=platform, user=user)
        _crane(crane, "push", str(directory), tag)
    return digest


def _crane(crane: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            [str(crane), *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=TIMEOUT_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CraneFailed(f"crane {args[0]}: {exc}") from None
    if done.returncode != 0:
        raise CraneFailed(f"crane {args[0]}: {done.stderr.strip() or done.returncode}")
    return done.stdout
