"""Pushing a module image with go-containerregistry's `crane` (hack/registry/build.sh
builds it from Go modules): the registry protocol is crane's, never written here.

crane talks plain HTTP to loopback, localhost and private addresses, TLS elsewhere,
and takes credentials from the user's Docker config, as it decides."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

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
    """Pushes an image of `layers` (on an empty OCI base) as `tag`, then sets its labels,
    platform and user and pushes that under the same tag. Returns the digest. A layer
    the registry holds already is not uploaded again (crane asks first)."""
    files = [arg for layer in layers for arg in ("-f", str(layer))]
    _crane(crane, "append", "--oci-empty-base", *files, "-t", tag)
    flags = [arg for key, value in sorted(labels.items()) for arg in ("-l", f"{key}={value}")]
    _crane(crane, "mutate", tag, *flags, "--set-platform", platform, "--user", user, "-t", tag)
    return _crane(crane, "digest", tag).strip()


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
