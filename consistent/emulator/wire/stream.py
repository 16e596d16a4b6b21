"""Packets over one asyncio stream: bounded reads, sequence ids, framed writes with drain.

The codec (:mod:`consistent.protocol.framing`) frames what we write; reading is done here
header by header so that the announced length is checked against ``max_allowed_packet``
before the payload is waited for (at most one read chunk of it is buffered), and so an
oversized packet can be answered with mysqld's ERR 1153 rather than a bare disconnect.

Sequence ids follow the protocol: every command starts at 0 on the client's side, each packet
of the exchange (in either direction) takes the next id modulo 256.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Iterable
from typing import Final

from consistent.emulator.wire.errors import PacketsOutOfOrder, PacketTooLarge, PeerClosed
from consistent.errors import RemoteProtocolError
from consistent.protocol.constants import MAX_PACKET_PAYLOAD
from consistent.protocol.framing import HEADER_SIZE, frame_packets

__all__ = ["PacketStream", "PacketTooLarge", "PacketsOutOfOrder", "PeerClosed"]

_HEADER: Final = struct.Struct("<I")
_DISCARD_CHUNK: Final = 1 << 16
_READ_CHUNK: Final = 1 << 16


class PacketStream:
    """One connection's packet layer.

    ``seq`` is the sequence id the next packet (read or written) must carry.  Writes are
    queued by :meth:`queue` and sent by :meth:`flush`, which always drains.
    """

    __slots__ = (
        "_in",
        "_out",
        "_reader",
        "_writer",
        "max_payload",
        "read_timeout",
        "seq",
        "write_timeout",
    )

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_payload: int,
        read_timeout: float,
        write_timeout: float,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.max_payload = max_payload
        self._in = bytearray()
        self._out: list[bytes] = []
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.seq = 0

    @property
    def peer(self) -> tuple[str, int] | None:
        """The client's address, if the transport knows it."""
        name = self._writer.get_extra_info("peername")
        if isinstance(name, tuple) and len(name) >= 2:
            return str(name[0]), int(name[1])
        return None

    async def read(self, timeout: float | None) -> bytes:
        """The next logical packet's payload.

        ``timeout`` bounds the wait for its first header (``None``: no bound); the rest of the
        packet must follow within ``read_timeout``.  Raises :class:`PeerClosed` on a clean
        close before the header, :class:`TimeoutError`, or :class:`RemoteProtocolError`
        (:class:`PacketTooLarge`, :class:`PacketsOutOfOrder`, truncated packet).

        Bytes are taken from the stream in chunks into a buffer of this stream's own, so a
        packet that arrived whole (the usual case) is read without waiting and without
        arming a timer.
        """
        if len(self._in) < HEADER_SIZE:
            async with asyncio.timeout(timeout):
                await self._fill(HEADER_SIZE, first=True)
        header = self._take_header()
        deadline: float | None = None  # read_timeout from the first wait on
        parts: list[bytes] = []
        size = 0
        while True:
            length = self._check(header, size)
            if len(self._in) < length:
                deadline = self._deadline(deadline)
                async with asyncio.timeout_at(deadline):
                    await self._fill(length, first=False)
            chunk = bytes(self._in[:length])
            del self._in[:length]
            parts.append(chunk)
            size += length
            if length < MAX_PACKET_PAYLOAD:
                return chunk if len(parts) == 1 else b"".join(parts)
            if len(self._in) < HEADER_SIZE:
                deadline = self._deadline(deadline)
                async with asyncio.timeout_at(deadline):
                    await self._fill(HEADER_SIZE, first=False, header=True)
            header = self._take_header()

    def _deadline(self, deadline: float | None) -> float:
        if deadline is None:
            return asyncio.get_running_loop().time() + self.read_timeout
        return deadline

    async def read_command(self, timeout: float | None) -> bytes:
        """The next command packet: its sequence id restarts at 0."""
        self.seq = 0
        return await self.read(timeout)

    def _take_header(self) -> int:
        word: int = _HEADER.unpack_from(self._in)[0]
        del self._in[:HEADER_SIZE]
        return word

    async def _fill(self, size: int, *, first: bool, header: bool | None = None) -> None:
        """Read from the stream until the buffer holds ``size`` bytes (at most one chunk
        more than asked for, as a stream reader's own buffer would)."""
        in_header = first if header is None else header
        while len(self._in) < size:
            chunk = await self._reader.read(_READ_CHUNK)
            if not chunk:
                if first and not self._in:
                    raise PeerClosed("the client closed the connection")
                if in_header:
                    raise RemoteProtocolError("connection closed inside a packet header")
                raise RemoteProtocolError("connection closed inside a packet")
            self._in += chunk

    def _check(self, header: int, size_so_far: int) -> int:
        length = header & 0xFFFFFF
        seq = header >> 24
        expected = self.seq
        self.seq = (seq + 1) & 0xFF  # an error answer follows the packet the client sent
        if seq != expected:
            raise PacketsOutOfOrder(f"packet with sequence id {seq}, expected {expected}")
        if size_so_far + length > self.max_payload:
            raise PacketTooLarge(
                f"packet larger than max_allowed_packet ({self.max_payload})", length
            )
        return length

    def queue(self, payload: bytes) -> None:
        """Frame one payload with the next sequence id(s) and buffer it for :meth:`flush`."""
        data, self.seq = frame_packets(payload, self.seq)
        self._out.append(data)

    def queue_all(self, payloads: Iterable[bytes]) -> None:
        """:meth:`queue` each payload in order."""
        out = self._out
        seq = self.seq
        pack = _HEADER.pack
        for payload in payloads:
            size = len(payload)
            if size < MAX_PACKET_PAYLOAD:  # one physical packet: header, then the payload
                out.append(pack(size | seq << 24))
                out.append(payload)
                seq = (seq + 1) & 0xFF
            else:
                data, seq = frame_packets(payload, seq)
                out.append(data)
        self.seq = seq

    async def flush(self) -> None:
        """Write what was queued and wait until the transport accepted it (bounded by
        ``write_timeout``)."""
        if not self._out:
            return
        data = b"".join(self._out)
        self._out.clear()
        self._writer.write(data)
        if not self._writer.transport.get_write_buffer_size():
            # The socket took everything: drain() returns at once, no deadline to arm.
            await self._writer.drain()
            return
        async with asyncio.timeout(self.write_timeout):
            await self._writer.drain()

    async def send(self, *payloads: bytes) -> None:
        """Queue ``payloads`` and flush."""
        self.queue_all(payloads)
        await self.flush()

    async def discard(self, limit: int, timeout: float) -> None:
        """Read and drop up to ``limit`` bytes (or until EOF or ``timeout``).

        Used before closing on an oversized packet: a socket closed with unread data sends a
        reset, which can destroy the ERR packet in flight to the client.
        """
        buffered = min(limit, len(self._in))
        del self._in[:buffered]
        limit -= buffered
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(timeout):
                while limit > 0:
                    chunk = await self._reader.read(min(limit, _DISCARD_CHUNK))
                    if not chunk:
                        return
                    limit -= len(chunk)

    def abort_reads(self) -> None:
        """Close the transport so that a pending :meth:`read` ends with :class:`PeerClosed`;
        used to close an idle connection from outside its task."""
        self._writer.close()

    async def close(self, timeout: float) -> None:
        """Close the transport and wait (at most ``timeout``) until it is closed."""
        self._out.clear()
        self._writer.close()
        # The peer may already be gone; the transport is closed either way.
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(timeout):
                await self._writer.wait_closed()
