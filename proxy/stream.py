"""One TCP connection of the proxy, in either of two modes.

During the connection phase (handshake, authentication, TLS upgrade) a connection is read packet
by packet with :meth:`PacketEndpoint.read_packet`, a coroutine; reads are exact and pause after
each packet, so the bytes after an SSLRequest stay in the socket for the TLS layer.  In the
command phase it is switched to *stream mode* with :meth:`PacketEndpoint.stream`: the transport
gets a protocol whose ``data_received`` is the handler itself, so every chunk goes straight to
it, with no task switch and no copy, which is what keeps the relay's hot path close to a plain
byte forwarder.

Writes are not awaited on the hot path: the transport buffers them and tells the endpoint when
its buffer passes the high-water mark (``pause_writing``); the owner then stops reading the peer
that feeds it (flow control), and :meth:`PacketEndpoint.drain` waits for the buffer to empty.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
from collections.abc import Callable
from typing import Final, cast

from consistent.errors import RemoteProtocolError
from consistent.protocol.constants import MAX_PACKET_PAYLOAD
from consistent.protocol.framing import HEADER_SIZE, frame_packets
from proxy.errors import ConnectionClosed

__all__ = ["ConnectionClosed", "PacketEndpoint", "frame", "frame_command", "header", "renumber"]

_HEADER: Final = struct.Struct("<I")


def header(length: int, seq: int) -> bytes:
    """The 4-byte packet header for a payload of ``length`` (< 16 MiB) bytes."""
    return _HEADER.pack(length | (seq & 0xFF) << 24)


def frame(payload: bytes, seq: int) -> bytes:
    """One payload framed with sequence id ``seq`` (split when it reaches 16 MiB)."""
    if len(payload) < MAX_PACKET_PAYLOAD:
        return _HEADER.pack(len(payload) | (seq & 0xFF) << 24) + payload
    return frame_packets(payload, seq & 0xFF)[0]


def frame_command(payload: bytes) -> bytes:
    """A command packet: sequence id 0."""
    return frame(payload, 0)


def renumber(data: bytes | bytearray, seq: int) -> tuple[bytes, int]:
    """The whole packets at the start of ``data`` with sequence ids counting from ``seq``, and
    how many bytes of ``data`` they took (a partial packet at the end is left out)."""
    out = bytearray()
    pos = 0
    end = len(data)
    while end - pos >= HEADER_SIZE:
        length = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        if end - pos - HEADER_SIZE < length:
            break
        out += data[pos : pos + 3]
        out.append(seq & 0xFF)
        out += data[pos + HEADER_SIZE : pos + HEADER_SIZE + length]
        seq += 1
        pos += HEADER_SIZE + length
    return bytes(out), pos


class _Stream:
    """The command-phase protocol: every chunk goes straight to the handler (its
    ``data_received`` *is* the handler), the rest to the endpoint."""

    def __init__(self, owner: PacketEndpoint, handler: Callable[[bytes], None]) -> None:
        self.data_received = handler
        self._owner = owner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Not called: the transport already exists when it switches to this protocol."""

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def pause_writing(self) -> None:
        self._owner.pause_writing()

    def resume_writing(self) -> None:
        self._owner.resume_writing()


class PacketEndpoint(asyncio.BufferedProtocol):
    """An asyncio protocol that reads MySQL packets, then hands raw chunks to a handler.

    In packet mode it reads *exactly* one packet at a time (the transport is given a buffer
    the size of what the current packet still lacks), so that nothing after an SSLRequest is
    consumed: the TLS handshake that follows it reaches the TLS layer intact, however the
    client's bytes were coalesced.  ``max_payload`` bounds one logical packet.
    """

    def __init__(self, *, max_payload: int) -> None:
        self.transport: asyncio.Transport | None = None
        self._max_payload = max_payload
        # The packet being read: its header, its payload, and earlier 16 MiB fragments.
        self._head = bytearray(HEADER_SIZE)
        self._head_have = 0
        self._body = bytearray()
        self._body_have = 0
        self._fragments: list[bytes] = []
        self._size = 0
        self._scratch = bytearray(4096)
        self._packets: collections.deque[tuple[int, bytes, bytes]] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._handler: Callable[[bytes], None] | None = None
        self._closed: asyncio.Future[None] | None = None
        self._lost = False
        self._reading_paused = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        #: The TCP transport under TLS, once :meth:`start_tls` upgraded the connection.
        self._tcp: asyncio.Transport | None = None
        #: Called when the connection ends; set by the owner.
        self.on_lost: Callable[[BaseException | None], None] | None = None
        #: Called when the transport's write buffer passes / falls below its limits.
        self.on_write_paused: Callable[[bool], None] | None = None

    # ----------------------------------------------------------------- asyncio protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self._closed = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._error is not None:
            return memoryview(self._scratch)  # draining a connection that is being closed
        if self._head_have < HEADER_SIZE:
            return memoryview(self._head)[self._head_have :]
        return memoryview(self._body)[self._body_have :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._error is not None:
            return
        if self._head_have < HEADER_SIZE:
            self._head_have += nbytes
            if self._head_have < HEADER_SIZE:
                return
            length = int.from_bytes(self._head[:3], "little")
            if self._size + length > self._max_payload:
                self._error = RemoteProtocolError(f"packet larger than {self._max_payload} bytes")
                self._wake()
                return
            self._body = bytearray(length)
            self._body_have = 0
            if length:
                return
        else:
            self._body_have += nbytes
            if self._body_have < len(self._body):
                return
        self._physical_packet_done()

    def _physical_packet_done(self) -> None:
        head = bytes(self._head)
        body = bytes(self._body)
        self._head_have = 0
        self._body = bytearray()
        self._body_have = 0
        length = len(body)
        self._size += length
        self._fragments.append(head + body)
        if length == MAX_PACKET_PAYLOAD:
            return  # a continuation packet follows
        fragments = self._fragments
        self._fragments = []
        self._size = 0
        seq = fragments[0][3]
        if len(fragments) == 1:
            payload, raw = body, fragments[0]
        else:
            payload = b"".join([f[HEADER_SIZE:] for f in fragments])
            raw = b"".join(fragments)
        self._packets.append((seq, payload, raw))
        # Read nothing more until this packet is consumed: what follows may belong to
        # another layer (the TLS handshake after an SSLRequest).
        self._pause_reading()
        self._wake()

    def _pause_reading(self) -> None:
        transport = self.transport
        if not self._reading_paused and transport is not None and not self._lost:
            self._reading_paused = True
            transport.pause_reading()

    def _resume_reading(self) -> None:
        transport = self.transport
        if self._reading_paused and transport is not None and not self._lost:
            self._reading_paused = False
            transport.resume_reading()

    def feed(self, data: bytes) -> None:
        """Process bytes read elsewhere as if the transport had delivered them."""
        view = memoryview(data)
        while view:
            buffer = self.get_buffer(len(view))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._error is None:
            reason = f"connection lost: {exc}" if exc else "connection closed"
            self._error = ConnectionClosed(reason)
        self._wake()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)
        callback, self.on_lost = self.on_lost, None
        if callback is not None:
            callback(exc)

    def pause_writing(self) -> None:
        self._write_paused = True
        if self.on_write_paused is not None:
            self.on_write_paused(True)

    def resume_writing(self) -> None:
        self._write_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()
        if self.on_write_paused is not None:
            self.on_write_paused(False)

    # ----------------------------------------------------------------- packet mode

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read_packet(self, timeout: float | None) -> tuple[int, bytes]:
        """The next logical packet as ``(sequence id, payload)``.

        Raises :class:`ConnectionClosed`, :class:`RemoteProtocolError` or ``TimeoutError``.
        """
        async with asyncio.timeout(timeout):
            while not self._packets:
                if self._error is not None:
                    raise self._error
                self._resume_reading()
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
        seq, payload, _raw = self._packets.popleft()
        return seq, payload

    def _unread(self) -> bytes:
        """Bytes received in packet mode and not read as packets yet, as they arrived."""
        partial = bytes(self._head[: self._head_have])
        if self._head_have == HEADER_SIZE:
            partial += bytes(self._body[: self._body_have])
        leftover = b"".join([raw for _seq, _payload, raw in self._packets])
        leftover += b"".join(self._fragments) + partial
        self._packets.clear()
        self._fragments = []
        self._size = 0
        self._head_have = 0
        self._body = bytearray()
        self._body_have = 0
        return leftover

    def stream(self, handler: Callable[[bytes], None]) -> None:
        """Switch to stream mode: from now on every received chunk goes to ``handler``.
        Bytes already received and not yet read as packets are handed over first."""
        leftover = self._unread()
        self._handler = handler
        transport = self.transport
        if transport is not None:
            transport.set_protocol(cast(asyncio.BaseProtocol, _Stream(self, handler)))
            self._resume_reading()
        if leftover:
            handler(leftover)

    def packet_mode(self) -> None:
        """Switch back to packet mode (a re-authentication in the command phase)."""
        self._handler = None
        transport = self.transport
        if transport is not None:
            transport.set_protocol(self)

    # ----------------------------------------------------------------- writing and closing

    @property
    def lost(self) -> bool:
        """True once ``connection_lost`` was called."""
        return self._lost

    @property
    def closed(self) -> bool:
        """True once the connection is lost or closing."""
        t = self.transport
        return self._lost or t is None or t.is_closing()

    @property
    def write_paused(self) -> bool:
        """True while the transport's write buffer is above its high-water mark."""
        return self._write_paused

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue bytes for sending (no-op once the connection is gone)."""
        t = self.transport
        if t is not None and not self._lost:
            t.write(data)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until the write buffer is below its high-water mark (bounded by ``timeout``)."""
        if not self._write_paused or self._lost:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        async with asyncio.timeout(timeout):
            await waiter

    async def start_tls(
        self, context: ssl.SSLContext, *, server_side: bool, server_hostname: str | None = None
    ) -> None:
        """Upgrade the connection to TLS in place (after an SSLRequest)."""
        transport = self.transport
        if transport is None:
            raise ConnectionClosed("no transport")
        loop = asyncio.get_running_loop()
        # start_tls takes over reading (it resumes it for the TLS layer).
        self._reading_paused = False
        new = await loop.start_tls(
            transport, self, context, server_side=server_side, server_hostname=server_hostname
        )
        if new is None:
            raise ConnectionClosed("the connection closed during the TLS handshake")
        self._tcp = transport
        self.transport = new

    def close(self) -> None:
        """Close the transport after its buffered data is sent.

        Under TLS our close_notify is sent and the connection closed without waiting for the
        peer's: an idle client answers only when it next reads, and a graceful shutdown
        must not wait for it (mysqld does not either)."""
        t = self.transport
        if t is not None and not t.is_closing():
            t.close()
            tcp = self._tcp
            if tcp is not None and not tcp.is_closing():
                tcp.close()  # sends what TLS wrote (the close_notify last), then closes

    def abort(self) -> None:
        """Close the transport at once, dropping buffered data."""
        t = self.transport
        if t is not None:
            t.abort()

    async def wait_closed(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout``) until the connection is lost."""
        closed = self._closed
        if closed is None or closed.done():
            return
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(closed)
        except TimeoutError:
            self.abort()
