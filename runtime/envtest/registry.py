"""An OCI registry on loopback: distribution's `registry`, built from Go modules by
hack/registry/build.sh (with go-containerregistry's `crane` beside it, to push).

    with Registry(workdir) as registry:
        registry.host   # "127.0.0.1:<port>", for references such as 127.0.0.1:PORT/team/mod:v1

Its configuration is written by us, never read from the registry's defaults: it
listens on 127.0.0.1 only (the default is every interface, port 5000), has no
debug or metrics listener, stores blobs under `<workdir>/registry/storage`, exports
no traces (the default OpenTelemetry exporter sends to a collector on localhost),
and serves without authentication unless `htpasswd` names a file of bcrypt users
(then every request needs HTTP basic auth). Ready means `/v2/` answers: 200
without auth, 401 with it."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from runtime.envtest import process
from runtime.registry_build import BUILD_SCRIPT, RegistryMissing, registry_dir

STARTUP_TIMEOUT_SECONDS = 30.0
_POLL_SECONDS = 0.1


class RegistryFailed(Exception):
    """The registry exited or did not answer in time."""


def registry_config(port: int, storage: Path, htpasswd: Path | None) -> dict[str, object]:
    """distribution's configuration (JSON is YAML, which it reads)."""
    config: dict[str, object] = {
        "version": 0.1,
        "log": {"level": "info", "accesslog": {"disabled": False}},
        "storage": {
            "filesystem": {"rootdirectory": str(storage)},
            "delete": {"enabled": True},
            "maintenance": {"uploadpurging": {"enabled": False}},
        },
        "http": {"addr": f"127.0.0.1:{port}", "headers": {"X-Content-Type-Options": ["nosniff"]}},
    }
    if htpasswd is not None:
        config["auth"] = {"htpasswd": {"realm": "captf-local", "path": str(htpasswd)}}
    return config


class Registry:
    """One registry process; nothing starts before `with`. The directory is the caller's
    (the cluster's working directory): it is left in place on exit."""

    def __init__(
        self,
        workdir: Path,
        *,
        bin_dir: Path | None = None,
        htpasswd: Path | None = None,
        startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
    ) -> None:
        self._dir = workdir / "registry"
        self._bin_dir = bin_dir
        self._htpasswd = htpasswd
        self._startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0
        self._crane: Path | None = None

    def __enter__(self) -> Registry:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._proc is not None:
            process.stop(self._proc)
            self._proc = None

    def _start(self) -> None:
        bin_dir = self._bin_dir or registry_dir()
        self._crane = bin_dir / "crane"
        self._dir.mkdir(parents=True, exist_ok=True)
        (self._port,) = process.free_ports(1)
        config = self._dir / "config.yml"
        storage = self._dir / "storage"
        config.write_text(json.dumps(registry_config(self._port, storage, self._htpasswd)))
        argv = [str(bin_dir / "registry"), "serve", str(config)]
        # "none": the default exporter would send every request's spans to localhost:4318.
        env = {**os.environ, "OTEL_TRACES_EXPORTER": "none"}
        self._proc = process.spawn(argv, self.log, env=env)
        self._wait(self._proc)

    def _wait(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while not self._answers():
            if proc.poll() is not None:
                raise RegistryFailed(
                    f"registry exited with status {proc.returncode}; log: {self.log}\n"
                    f"{process.log_tail(self.log)}"
                )
            if time.monotonic() > deadline:
                raise RegistryFailed(f"registry not ready; log: {self.log}")
            time.sleep(_POLL_SECONDS)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/v2/", timeout=2) as response:
                return int(response.status) == 200
        except urllib.error.HTTPError as refused:
            return refused.code == 401 and self._htpasswd is not None
        except OSError:
            return False

    @property
    def host(self) -> str:
        """`127.0.0.1:<port>`: the registry part of an image reference."""
        if self._proc is None:
            raise RuntimeError("Registry is not running: use it as a context manager")
        return f"127.0.0.1:{self._port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def crane(self) -> Path:
        """go-containerregistry's crane from the same build, to push images in tests."""
        if self._crane is None:
            raise RuntimeError("Registry is not running: use it as a context manager")
        return self._crane

    @property
    def log(self) -> Path:
        return self._dir / "registry.log"

    def manifests_of(self, repository: str) -> set[str]:
        """Every manifest ever pushed to `repository` (`sha256:<hex>`), tagged or not, as
        the registry's storage keeps them: what shows a tag that once named another."""
        repositories = self.storage / "docker" / "registry" / "v2" / "repositories"
        revisions = repositories / repository / "_manifests" / "revisions" / "sha256"
        if not revisions.is_dir():
            return set()
        return {f"sha256:{entry.name}" for entry in revisions.iterdir()}

    @property
    def storage(self) -> Path:
        return self._dir / "storage"


__all__ = ["BUILD_SCRIPT", "Registry", "RegistryFailed", "RegistryMissing", "registry_dir"]
