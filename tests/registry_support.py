"""Images for tests: layers built here as tarballs, pushed with crane to the test registry;
and the credentials of the registry that wants them."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import tarfile
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from runtime.envtest.registry import Registry

# The user of the `auth_registry` fixture.
REGISTRY_USER = ("puller", "s3cret-pass")


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


def push(
    registry: Registry, reference: str, layers: Iterable[Path], docker_config: Path | None = None
) -> str:
    """Push an image of `layers` (on an empty base) as `reference` (repository and tag,
    without the registry); its manifest's digest. `docker_config`: crane's credentials."""
    target = f"{registry.host}/{reference}"
    argv = ["append", "--oci-empty-base", "-t", target]
    for path in layers:
        argv += ["-f", str(path)]
    crane(registry, *argv, docker_config=docker_config)
    return crane(registry, "digest", target, docker_config=docker_config)


def crane(registry: Registry, *args: str, docker_config: Path | None = None) -> str:
    env = os.environ | ({"DOCKER_CONFIG": str(docker_config)} if docker_config else {})
    done = subprocess.run(
        [str(registry.crane), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    return done.stdout.strip()


def htpasswd(path: Path, user: str, password: str) -> Path:
    """The registry's users file: one bcrypt entry (the only scheme it accepts), hashed by
    the C library's crypt, which here supports bcrypt."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 5))
    if not hashed or not hashed.startswith("$2"):
        raise RuntimeError("this C library's crypt has no bcrypt")
    path.write_text(f"{user}:{hashed}\n")
    return path


def dockerconfigjson(host: str, user: str, password: str) -> str:
    """A Docker config with one registry's credentials, as a dockerconfigjson Secret holds."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    return json.dumps({"auths": {host: {"auth": auth}}})


def requests(registry: Registry, what: str) -> int:
    """How many requests the registry's access log holds whose line contains `what`."""
    return sum(1 for line in registry.log.read_text().splitlines() if what in line)
