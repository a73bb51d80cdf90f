"""HTTP/1.1 to the API server for a short-lived process: JSON requests over one
keep-alive connection on asyncio streams, with the same configuration, credentials and
errors as the session transport (runtime.transport), and no watches.

A runner pod makes a handful of requests and exits; importing aiohttp would cost it about
0.1 s of CPU on every start, as much as the requests themselves. A kubeconfig that names
a proxy goes through the session transport, which speaks to proxies.

Invariants: a connection is reused only while the previous answer was read whole, the
server did not ask to close it, and it was idle for less than `KEEPALIVE_S` (aiohttp's
default), so a connection the server dropped while tofu ran is not written to. Any error
mid-request closes the connection: the next request opens a fresh one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import orjson

from runtime.transport import kubeconfig
from runtime.transport.answer import answer_of
from runtime.transport.kubeconfig import ClusterConfig

if TYPE_CHECKING:
    from runtime.transport.session import Transport

KEEPALIVE_S = 15.0
_NO_BODY = frozenset({204, 304})

Answer = tuple[int, bytes, dict[str, str]]


class ThinTransport:
    """`request` of runtime.transport.Transport, for a process that makes few."""

    def __init__(self, config: ClusterConfig) -> None:
        url = urlsplit(config.host)
        self._host = config.host
        self._netloc = url.netloc
        self._address = (url.hostname or "", url.port or (443 if config.ssl else 80))
        self._ssl = config.ssl
        self._sni = (config.server_hostname or url.hostname) if config.ssl else None
        self._credentials = config.credentials
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._idle_since = 0.0

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
        timeout: float = 30.0,  # noqa: ASYNC109 -- a per-request HTTP deadline, as Transport's
        accept: str = "application/json",
    ) -> dict[str, Any]:
        """One request; the decoded JSON answer. Non-2xx raises `ApiError`."""
        data = None if body is None else orjson.dumps(body)
        target = path + ("?" + urlencode(params) if params else "")
        kinds = (content_type, accept)
        status, payload, headers = await self._send(method, target, data, kinds, timeout)
        if status == 401 and await self._credentials.refresh():
            status, payload, headers = await self._send(method, target, data, kinds, timeout)
        return answer_of(status, payload, headers)

    async def close(self) -> None:
        self._drop()

    async def _send(
        self,
        method: str,
        target: str,
        data: bytes | None,
        kinds: tuple[str, str],
        timeout: float,  # noqa: ASYNC109 -- request()'s deadline, carried through
    ) -> Answer:
        credentials = await self._credentials.headers()
        head = {"Host": self._netloc, "Accept": kinds[1], "Content-Type": kinds[0]}
        head |= credentials | {"Content-Length": str(len(data or b""))}
        lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items())]
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await self._connection()
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + (data or b""))
                await writer.drain()
                answer, keep = await _read_answer(reader)
        except BaseException:
            self._drop()
            raise
        if keep:
            self._idle_since = time.monotonic()
        else:
            self._drop()
        return answer

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        conn = self._conn
        stale = time.monotonic() - self._idle_since >= KEEPALIVE_S
        if conn is not None and (stale or conn[0].at_eof() or conn[1].is_closing()):
            self._drop()
            conn = None
        if conn is None:
            host, port = self._address
            conn = await asyncio.open_connection(
                host, port, ssl=self._ssl, server_hostname=self._sni
            )
            self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            self._conn = None


async def _read_answer(reader: asyncio.StreamReader) -> tuple[Answer, bool]:
    """The status, body and headers (names title-cased), and whether the connection may
    be used again."""
    try:
        status_line = (await reader.readuntil(b"\r\n")).decode("latin-1")
        version, code, *_ = status_line.split(" ", 2)
        headers: dict[str, str] = {}
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().title()] = value.strip()
        status = int(code)
        keep = version == "HTTP/1.1" and headers.get("Connection", "").lower() != "close"
        if status in _NO_BODY:
            return (status, b"", headers), keep
        if headers.get("Transfer-Encoding", "").lower() == "chunked":
            return (status, await _chunked(reader), headers), keep
        if "Content-Length" in headers:
            return (status, await reader.readexactly(int(headers["Content-Length"])), headers), keep
        return (status, await reader.read(), headers), False  # delimited by the close
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        # A cut or garbled answer is the connection's failure, as a reset would be.
        raise ConnectionResetError(f"the API server's answer was cut or garbled: {exc}") from None


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
        pass
    return b"".join(parts)


@asynccontextmanager
async def open_thin_transport(
    kubeconfig_path: str | None = None,
) -> AsyncIterator[ThinTransport | Transport]:
    """As runtime.transport.open_transport; the session transport when a proxy is named."""
    config = kubeconfig.load(kubeconfig_path)
    if config.proxy:
        from runtime.transport.session import open_transport

        async with open_transport(kubeconfig_path) as session:
            yield session
        return
    thin = ThinTransport(config)
    try:
        yield thin
    finally:
        await thin.close()
