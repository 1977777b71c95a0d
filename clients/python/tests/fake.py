"""A scripted fake Ticketing server for unit tests: the test reads what the
client wrote, line by line, and decides every reply, close and half-close."""

from __future__ import annotations

import asyncio
from typing import Optional


class FakeConn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lines: list[str] = []
        self.eof = asyncio.Event()
        self._queue: asyncio.Queue[Optional[str]] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            while True:
                raw = await self.reader.readline()
                if not raw:
                    break
                line = raw.decode().rstrip("\n")
                self.lines.append(line)
                await self._queue.put(line)
        except (ConnectionError, asyncio.CancelledError):
            pass
        self.eof.set()
        await self._queue.put(None)

    async def expect(self, prefix: str = "", timeout: float = 3) -> str:
        """The next line the client wrote (it must start with ``prefix``)."""
        line = await asyncio.wait_for(self._queue.get(), timeout)
        assert line is not None, f"the client closed instead of sending {prefix!r}"
        assert line.startswith(prefix), f"expected {prefix!r}, got {line!r}"
        return line

    async def nothing(self, within: float = 0.3) -> None:
        """Asserts the client writes nothing for ``within`` seconds."""
        try:
            line = await asyncio.wait_for(self._queue.get(), within)
        except asyncio.TimeoutError:
            return
        raise AssertionError(f"unexpected line {line!r}")

    def send(self, text: str) -> None:
        self.writer.write(text.encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def greet(self, node: str = "fake") -> None:
        await self.expect("H 1")
        self.send(f"H 1 {node}")

    def close(self) -> None:
        """A clean close (FIN)."""
        if not self.writer.is_closing():
            self.writer.close()

    def reset(self) -> None:
        """An abortive close (RST)."""
        transport = self.writer.transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket
            import struct

            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()


class FakeServer:
    def __init__(self) -> None:
        self.conns: asyncio.Queue[FakeConn] = asyncio.Queue()
        self.all: list[FakeConn] = []
        self.server: Optional[asyncio.AbstractServer] = None
        self.port = 0

    async def start(self, port: int = 0) -> FakeServer:
        self.server = await asyncio.start_server(self._on_conn, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        c = FakeConn(reader, writer)
        self.all.append(c)
        await self.conns.put(c)

    async def accept(self, timeout: float = 3) -> FakeConn:
        return await asyncio.wait_for(self.conns.get(), timeout)

    async def accept_greeted(self, node: str = "fake", timeout: float = 3) -> FakeConn:
        c = await self.accept(timeout)
        await c.greet(node)
        return c

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for c in self.all:
            c.close()
