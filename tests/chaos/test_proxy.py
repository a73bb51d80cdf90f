"""The fault-injecting proxy against a local echo server: it forwards, resets, blackholes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from tests.chaos.proxy import Proxy

WAIT = 10.0


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def echo_proxy() -> AsyncIterator[Proxy]:
    """In the test's own loop (the fixtures' loop is the session's)."""
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    async with server, Proxy("127.0.0.1", server.sockets[0].getsockname()[1]) as p:
        yield p


async def _connect(proxy: Proxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def test_forwards_both_ways() -> None:
    async with echo_proxy() as proxy:
        await _forwards(proxy)


async def _forwards(proxy: Proxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"ping")
    assert await asyncio.wait_for(reader.readexactly(4), WAIT) == b"ping"
    writer.close()


async def test_reset_aborts_open_connections() -> None:
    async with echo_proxy() as proxy:
        await _resets(proxy)


async def _resets(proxy: Proxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"x")
    await asyncio.wait_for(reader.readexactly(1), WAIT)
    assert proxy.reset() == 1
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(1), WAIT)
    writer.close()


async def test_a_partition_holds_bytes_until_it_heals() -> None:
    async with echo_proxy() as proxy:
        await _partitions(proxy)


async def _partitions(proxy: Proxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"a")
    await asyncio.wait_for(reader.readexactly(1), WAIT)
    proxy.partition()
    writer.write(b"held")
    late, new = await _connect(proxy)
    new.write(b"new")
    # Nothing comes back while partitioned: the reads are still pending after a few
    # loop turns with the data long since written.
    pending = asyncio.ensure_future(reader.readexactly(4))
    pending_new = asyncio.ensure_future(late.readexactly(3))
    for _ in range(50):
        await asyncio.sleep(0)
    assert not pending.done()
    assert not pending_new.done()
    proxy.heal()
    assert await asyncio.wait_for(pending, WAIT) == b"held"
    assert await asyncio.wait_for(pending_new, WAIT) == b"new"
    writer.close()
    new.close()
