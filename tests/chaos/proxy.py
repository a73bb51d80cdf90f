"""A TCP proxy on loopback between one controller and the API server, with two faults.

- `reset()` aborts every open connection with a TCP RST on both sides (SO_LINGER 0), as a
  load balancer or a NAT table flush would: clients see ECONNRESET mid-request or mid-watch.
- `partition()` is a blackhole: while it lasts no byte moves in either direction and new
  connections are accepted but not connected upstream. Nothing is closed, so clients find
  out only through their own timeouts; when it heals, what was buffered flows on, as TCP
  retransmission would deliver it.

TLS passes through untouched (the API server's certificate names 127.0.0.1)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from types import TracebackType

CHUNK = 65536


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Proxy:
    """`async with Proxy(host, port) as proxy:` listens on `proxy.port` until the block ends."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Every live connection, as its two writers (client side, upstream side).
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self.port = 0
        self.connections = 0
        self.resets = 0

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        self._open.set()
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def partitioned(self) -> bool:
        return not self._open.is_set()

    def partition(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    def reset(self) -> int:
        """RST every open connection; returns how many there were."""
        pairs = list(self._pairs)
        for client, upstream in pairs:
            _abort_with_rst(client)
            if upstream is not None:
                _abort_with_rst(upstream)
        self.resets += len(pairs)
        return len(pairs)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        pending: tuple[asyncio.StreamWriter, asyncio.StreamWriter | None] = (writer, None)
        self._pairs.add(pending)
        try:
            await self._open.wait()
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            self._pairs.discard(pending)
            _abort_with_rst(writer)
            return
        pair = (writer, up_writer)
        self._pairs.discard(pending)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            for w in pair:
                w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copies one direction until EOF or an error; stalls while partitioned."""
        try:
            while True:
                await self._open.wait()
                data = await reader.read(CHUNK)
                if not data:
                    break
                await self._open.wait()
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, asyncio.IncompleteReadError):
            writer.transport.abort()
