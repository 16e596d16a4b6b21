"""A plain TCP byte forwarder on uvloop: the ceiling for any Python proxy on this machine.

    python bench/forwarder.py LISTEN_PORT TARGET_PORT      (both on 127.0.0.1)

It understands nothing: bytes from the client go to the server and back, with the same
flow control a real proxy needs (reading pauses while the other side's buffer is full).
"""

from __future__ import annotations

import asyncio
import sys

import uvloop


class Side(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: Side | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)
        else:
            self.early.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class Client(Side):
    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self.connect())

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, server = await loop.create_connection(Side, "127.0.0.1", self.target)
        except OSError:
            if self.transport is not None:
                self.transport.close()
            return
        server.peer, self.peer = self, server
        for side, other in ((self, server), (server, self)):
            for data in side.early:
                other.transport.write(data)  # type: ignore[union-attr]
            side.early.clear()


async def main(listen: int, target: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Client(target), "127.0.0.1", listen, backlog=2048)
    print(f"forwarding 127.0.0.1:{listen} -> 127.0.0.1:{target}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(main(int(sys.argv[1]), int(sys.argv[2])))
