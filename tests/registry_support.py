"""Images for tests: layers built here as tarballs, pushed with crane to the test registry."""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from runtime.envtest.registry import Registry


def layer(path: Path, files: Mapping[str, bytes], extra: Iterable[tarfile.TarInfo] = ()) -> Path:
    """A gzip-compressed layer at `path` with `files` (name -> content, mode 0644) and
    `extra` entries as given (links, whiteouts, hostile names)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return path


def symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


def push(registry: Registry, reference: str, layers: Iterable[Path]) -> str:
    """Push an image of `layers` (on an empty base) as `reference` (repository and tag,
    without the registry); its manifest's digest."""
    target = f"{registry.host}/{reference}"
    argv = [str(registry.crane), "append", "--oci-empty-base", "-t", target]
    for path in layers:
        argv += ["-f", str(path)]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return crane(registry, "digest", target)


def crane(registry: Registry, *args: str) -> str:
    done = subprocess.run(
        [str(registry.crane), *args], check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip()


def requests(registry: Registry, what: str) -> int:
    """How many requests the registry's access log holds whose line contains `what`."""
    return sum(1 for line in registry.log.read_text().splitlines() if what in line)
