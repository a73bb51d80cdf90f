"""Where the API server is and who we are: a kubeconfig, or the pod's service account.

A small reader for the fields a controller uses, instead of kubernetes_asyncio's
loader: importing that package imports its generated client (about 38 MiB of
an idle process). Supported: the current context's cluster (`server`,
`certificate-authority[-data]`, `insecure-skip-tls-verify`, `tls-server-name`,
`proxy-url`) and user (`token`, `tokenFile`, `client-certificate[-data]` with
`client-key[-data]`, `username`/`password`, and `exec` credential plugins that
return a token); in-cluster, the service account's token file, re-read as the
kubelet rotates it. Paths in a kubeconfig are relative to its directory."""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import orjson

from runtime.errors import ConfigError
from runtime.incluster import DEFAULT_SERVICE_ACCOUNT_DIR, service_account_dir
from runtime.jsonobj import Json

SERVICE_ACCOUNT = DEFAULT_SERVICE_ACCOUNT_DIR
# The kubelet rotates projected tokens well before they expire; client-go re-reads the
# file once a minute.
TOKEN_FILE_REREAD_SECONDS = 60.0
# An exec plugin's token without an expiry is kept until a 401 says otherwise.
EXEC_TIMEOUT_SECONDS = 60.0


class Credentials(Protocol):
    async def headers(self) -> dict[str, str]:
        """The authentication headers for the next request."""
        ...

    async def refresh(self) -> bool:
        """After a 401: fetch new credentials; False when there is nothing to refresh."""
        ...


class NoCredentials:
    async def headers(self) -> dict[str, str]:
        return {}

    async def refresh(self) -> bool:
        return False


@dataclass
class StaticHeader:
    value: str

    async def headers(self) -> dict[str, str]:
        return {"Authorization": self.value}

    async def refresh(self) -> bool:
        return False


@dataclass
class TokenFile:
    """A bearer token read from a file, again once it is a minute old or after a 401."""

    path: Path
    clock: Callable[[], float] = time.monotonic
    _token: str = ""
    _read_at: float = field(default=-TOKEN_FILE_REREAD_SECONDS)

    async def headers(self) -> dict[str, str]:
        if not self._token or self.clock() - self._read_at >= TOKEN_FILE_REREAD_SECONDS:
            await self.refresh()
        return {"Authorization": f"Bearer {self._token}"}

    async def refresh(self) -> bool:
        self._token = self.path.read_text().strip()
        self._read_at = self.clock()
        return True


@dataclass
class ExecPlugin:
    """A client-go credential plugin: runs the command, reads an ExecCredential's token."""

    command: str
    args: list[str]
    env: dict[str, str]
    api_version: str
    _token: str = ""

    async def headers(self) -> dict[str, str]:
        if not self._token:
            await self.refresh()
        return {"Authorization": f"Bearer {self._token}"}

    async def refresh(self) -> bool:
        request = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {}}
        env = os.environ | self.env | {"KUBERNETES_EXEC_INFO": orjson.dumps(request).decode()}
        process = await asyncio.create_subprocess_exec(
            self.command,
            *self.args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(EXEC_TIMEOUT_SECONDS):
            out, err = await process.communicate()
        if process.returncode != 0:
            first = err.decode(errors="replace").strip().splitlines()[:1]
            raise ConfigError(f"exec plugin {self.command} failed: {' '.join(first)}")
        token = ((orjson.loads(out) or {}).get("status") or {}).get("token")
        if not token:
            raise ConfigError(f"exec plugin {self.command} returned no token")
        self._token = str(token)
        return True


@dataclass
class ClusterConfig:
    """What a transport needs to reach and authenticate to one API server."""

    host: str
    ssl: ssl.SSLContext | None  # None: plain HTTP
    credentials: Credentials
    server_hostname: str | None = None
    proxy: str | None = None


def load(explicit: str | None) -> ClusterConfig:
    """From a kubeconfig path, else $KUBECONFIG, else ~/.kube/config, else in-cluster."""
    path = kubeconfig_path(explicit)
    if path is None:
        # A process node names each pod's own token directory (runtime/incluster.py).
        return in_cluster(service_account_dir())
    if not path.is_file():
        raise ConfigError(f"kubeconfig {path} is not a readable file")
    import yaml  # here, not above: a pod's in-cluster config needs no YAML parser

    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"kubeconfig {path} cannot be read: {err}") from None
    return from_kubeconfig(config, path.parent)


def kubeconfig_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get("KUBECONFIG")
    if env:
        # Like kubectl, a list of files; we read one, the first present.
        for part in env.split(os.pathsep):
            if part and Path(part).expanduser().exists():
                return Path(part).expanduser()
    default = Path.home() / ".kube" / "config"
    return default if default.exists() else None


def in_cluster(root: Path = SERVICE_ACCOUNT) -> ClusterConfig:
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    token = root / "token"
    if not host or not port or not token.exists():
        raise ConfigError("no kubeconfig found and not running in a cluster")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    context = ssl.create_default_context(cafile=str(root / "ca.crt"))
    return ClusterConfig(f"https://{host}:{port}", context, TokenFile(token))


def from_kubeconfig(config: Json, base: Path) -> ClusterConfig:
    current = config.get("current-context")
    if not current:
        raise ConfigError("kubeconfig has no current-context")
    context = _named(config, "contexts", current, "context")
    cluster = _named(config, "clusters", str(context.get("cluster", "")), "cluster")
    user = _named(config, "users", str(context.get("user", "")), "user", required=False)
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"kubeconfig cluster of context {current} has no server")
    tls = _ssl_context(cluster, user, base) if server.startswith("https") else None
    return ClusterConfig(
        server.rstrip("/"),
        tls,
        _credentials(user, base),
        server_hostname=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
    )


def _named(config: Json, section: str, name: str, key: str, *, required: bool = True) -> Json:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            found: Json = entry.get(key) or {}
            return found
    if required:
        raise ConfigError(f"kubeconfig has no {key} named {name!r}")
    return {}


def _credentials(user: Json, base: Path) -> Credentials:
    if user.get("token"):
        return StaticHeader(f"Bearer {user['token']}")
    if user.get("tokenFile"):
        return TokenFile(base / user["tokenFile"])
    if user.get("exec"):
        spec = user["exec"]
        env = {e["name"]: e["value"] for e in spec.get("env") or []}
        command = str(spec["command"])
        if "/" in command and not Path(command).is_absolute():
            command = str(base / command)
        return ExecPlugin(command, list(spec.get("args") or []), env, str(spec.get("apiVersion")))
    if user.get("username"):
        pair = f"{user['username']}:{user.get('password', '')}".encode()
        return StaticHeader(f"Basic {base64.b64encode(pair).decode()}")
    return NoCredentials()


def _ssl_context(cluster: Json, user: Json, base: Path) -> ssl.SSLContext:
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        context = ssl.create_default_context(cadata=pem)
    elif cluster.get("certificate-authority"):
        context = ssl.create_default_context(cafile=str(base / cluster["certificate-authority"]))
    else:
        context = ssl.create_default_context()
    with _pem(user, "client-certificate", base) as cert, _pem(user, "client-key", base) as key:
        if cert is not None:
            context.load_cert_chain(cert, key)
    return context


@contextmanager
def _pem(user: Json, field_name: str, base: Path) -> Iterator[str | None]:
    """A PEM file path for a `<field>` or `<field>-data` entry (the data in a private
    temporary file for as long as ssl needs to load it: it reads only paths)."""
    data = user.get(f"{field_name}-data")
    if not data:
        path = user.get(field_name)
        yield None if not path else str(base / path)
        return
    with tempfile.NamedTemporaryFile(prefix="captf-", suffix=".pem") as handle:
        handle.write(base64.b64decode(data))
        handle.flush()
        yield handle.name
