"""The transport of long-lived processes: an aiohttp session, pooled connections, watches.
`runtime.transport` gives its names (see there)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import aiohttp
import orjson

from runtime.errors import ApiError
from runtime.transport import kubeconfig
from runtime.transport.answer import answer_of
from runtime.transport.kubeconfig import ClusterConfig

# Watches hold a connection each for minutes; the pool must not starve ordinary requests.
# The content type of a JSON merge patch (RFC 7386), as the API server takes it.
MERGE_PATCH = "application/merge-patch+json"
_POOL_SIZE = 64

__all__ = ["MERGE_PATCH", "ClusterConfig", "Transport", "open_transport"]


class Transport:
    """An HTTP session bound to one API server and one identity."""

    def __init__(self, config: ClusterConfig, session: aiohttp.ClientSession) -> None:
        self._session = session
        self._credentials = config.credentials
        self._server_hostname = config.server_hostname
        self._proxy = config.proxy
        self._host = config.host

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
        if status == 401 and await self._credentials.refresh():
            status, payload, headers = await self._send(method, path, params, data, kinds, deadline)
        return answer_of(status, payload, headers)

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
        if response.status == 401 and await self._credentials.refresh():
            response.release()
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
        # Asked per request: a token file or a plugin may have rotated the token.
        credentials = await self._credentials.headers()
        return {"Accept": accept, "Content-Type": content_type} | credentials


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
async def open_transport(kubeconfig_path: str | None = None) -> AsyncIterator[Transport]:
    """From a kubeconfig path, else $KUBECONFIG, else ~/.kube/config, else in-cluster.

    Raises `ConfigError` when there is no usable cluster configuration."""
    config = kubeconfig.load(kubeconfig_path)
    connector = aiohttp.TCPConnector(limit=_POOL_SIZE, ssl=config.ssl or False)
    session = aiohttp.ClientSession(connector=connector)
    try:
        yield Transport(config, session)
    finally:
        await session.close()
