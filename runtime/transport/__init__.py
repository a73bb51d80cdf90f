"""HTTP to the API server: raw JSON in and out, nothing else.

kubernetes_asyncio supplies what is tedious to get right: kubeconfig and
in-cluster loading, TLS, client certificates, and credentials that refresh
(exec plugins, the projected service-account token). Everything else is ours:
bodies are encoded and decoded with orjson, never through generated models.

This is the only module that imports kubernetes_asyncio. `typed_client` and
`typed_watch` are re-exported for `runtime.transport.peer`, the benchmark's
yardstick, so that the import stays here."""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client as typed_client
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio import watch as typed_watch
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.client.rest import RESTClientObject

from runtime.errors import ApiError, ConfigError

# Watches hold a connection each for minutes; the pool must not starve ordinary requests.
_POOL_SIZE = 64
_LARGE_BODY = 1 << 20

__all__ = [
    "Configuration",
    "Transport",
    "load_configuration",
    "open_transport",
    "typed_client",
    "typed_watch",
]


class Transport:
    """An HTTP session bound to one API server and one identity."""

    def __init__(
        self,
        configuration: Any,
        rest: Any,
        reload_credentials: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self._configuration = configuration
        self._session: aiohttp.ClientSession = rest.pool_manager
        self._server_hostname: str | None = rest.server_hostname
        self._proxy: str | None = rest.proxy
        self._host = str(configuration.host).rstrip("/")
        # Re-runs the kubeconfig's credential source after a 401; None for in-cluster,
        # where the configuration re-reads the token file on its own.
        self._reload_credentials = reload_credentials

    @property
    def host(self) -> str:
        return self._host

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 -- a per-request HTTP deadline, part of the contract
        accept: str = "application/json",
    ) -> dict[str, Any]:
        """One request; the decoded JSON answer. Non-2xx raises `ApiError`."""
        data = None if body is None else orjson.dumps(body)
        deadline = aiohttp.ClientTimeout(total=timeout)
        kinds = (content_type, accept)
        status, payload, headers = await self._send(method, path, params, data, kinds, deadline)
        if status == 401 and self._reload_credentials is not None:
            await self._reload_credentials()
            status, payload, headers = await self._send(method, path, params, data, kinds, deadline)
        if status >= 300:
            raise ApiError.from_response(status, payload, headers)
        if not payload:
            return {}
        decoded = _decode(payload)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def stream(
        self, path: str, *, params: Mapping[str, str], accept: str = "application/json"
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """A watch: one raw line (one JSON event) at a time. Non-2xx raises `ApiError` on entry.

        No read timeout here: the watch layer decides how long silence may last."""
        return self._stream(path, params, accept)

    @asynccontextmanager
    async def _stream(
        self, path: str, params: Mapping[str, str], accept: str
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0)
        response = await self._open(path, params, timeout, accept)
        if response.status == 401 and self._reload_credentials is not None:
            response.release()
            await self._reload_credentials()
            response = await self._open(path, params, timeout, accept)
        try:
            if response.status >= 300:
                payload = await response.read()
                raise ApiError.from_response(response.status, payload, response.headers)
            yield _lines(response.content)
        finally:
            # A watch abandoned mid-stream cannot return its connection to the pool.
            if response.content.at_eof():
                response.release()
            else:
                response.close()

    async def close(self) -> None:
        await self._session.close()

    async def _open(
        self, path: str, params: Mapping[str, str], deadline: aiohttp.ClientTimeout, accept: str
    ) -> aiohttp.ClientResponse:
        return await self._session.request(
            "GET",
            self._host + path,
            params=params,
            headers=await self._headers("application/json", accept),
            timeout=deadline,
            proxy=self._proxy,
            server_hostname=self._server_hostname,
        )

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        kinds: tuple[str, str],
        deadline: aiohttp.ClientTimeout,
    ) -> tuple[int, bytes, Mapping[str, str]]:
        async with self._session.request(
            method,
            self._host + path,
            params=params,
            data=data,
            headers=await self._headers(*kinds),
            timeout=deadline,
            proxy=self._proxy,
            server_hostname=self._server_hostname,
        ) as response:
            return response.status, await response.read(), response.headers

    async def _headers(self, content_type: str, accept: str) -> dict[str, str]:
        # Asked per request: the configuration's refresh hook may have rotated the token.
        headers = {"Accept": accept, "Content-Type": content_type}
        auth = await self._configuration.auth_settings()
        for setting in auth.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers


def _decode(payload: bytes) -> Any:
    # Decoding builds only acyclic dicts and lists: the cyclic collector can find
    # nothing in them, yet left on it rescans the growing result again and again
    # (a 27 MB list of 10,000 Jobs decodes 6 times slower). No await happens in
    # between, so nothing else runs while it is off.
    if len(payload) < _LARGE_BODY or not gc.isenabled():
        return orjson.loads(payload)
    gc.disable()
    try:
        return orjson.loads(payload)
    finally:
        gc.enable()


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split the body into lines ourselves: aiohttp's readline caps a line at its buffer size."""
    pending = b""
    async for chunk in content.iter_any():
        pending += chunk
        if b"\n" not in chunk:
            continue
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line:
                yield line
    if pending.strip():
        yield pending


@asynccontextmanager
async def open_transport(kubeconfig: str | None = None) -> AsyncIterator[Transport]:
    """From a kubeconfig path, else $KUBECONFIG, else ~/.kube/config, else in-cluster config."""
    configuration = Configuration()
    reload = await load_configuration(configuration, kubeconfig)
    configuration.connection_pool_maxsize = _POOL_SIZE
    rest = RESTClientObject(configuration)
    transport = Transport(configuration, rest, reload)
    try:
        yield transport
    finally:
        await transport.close()


async def load_configuration(
    configuration: Any, kubeconfig: str | None
) -> Callable[[], Awaitable[None]] | None:
    """Fills `configuration`; ConfigError when there is no usable cluster configuration."""
    try:
        return await _load_configuration(configuration, kubeconfig)
    except kube_config.ConfigException as err:
        raise ConfigError(str(err)) from None


async def _load_configuration(
    configuration: Any, kubeconfig: str | None
) -> Callable[[], Awaitable[None]] | None:
    path = _kubeconfig_path(kubeconfig)
    if path is not None and not path.is_file():
        raise ConfigError(f"kubeconfig {path} is not a readable file")
    if path is None:
        kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return None
    loader = await kube_config.load_kube_config(
        config_file=str(path), client_configuration=configuration, persist_config=False
    )

    async def reload() -> None:
        await loader.load_and_set(configuration)

    return reload


def _kubeconfig_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get("KUBECONFIG")
    if env:
        # Like kubectl, a list of files; kubernetes_asyncio reads one, so take the first present.
        for part in env.split(os.pathsep):
            if part and Path(part).expanduser().exists():
                return Path(part).expanduser()
    default = Path.home() / ".kube" / "config"
    return default if default.exists() else None
