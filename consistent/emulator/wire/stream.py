"""Packets over one connection: bounded reads, sequence ids, framed writes with drain.

The codec (:mod:`consistent.protocol.framing`) frames what we write; reading is done here
header by header, from the buffer of the connection's
:class:`~consistent.emulator.wire.transport.PacketProtocol`, so that the announced length is
checked against ``max_allowed_packet`` before the payload is waited for, and so an oversized
packet can be answered with mysqld's ERR 1153 rather than a bare disconnect.  A packet that
arrived whole (the usual case) is read without waiting and without arming a timer.

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
from consistent.emulator.wire.transport import PacketProtocol
from consistent.errors import RemoteProtocolError
from consistent.protocol.constants import MAX_PACKET_PAYLOAD
from consistent.protocol.framing import HEADER_SIZE, frame_packets

__all__ = ["PacketStream", "PacketTooLarge", "PacketsOutOfOrder", "PeerClosed"]

_HEADER: Final = struct.Struct("<I")


class PacketStream:
    """One connection's packet layer.

    ``seq`` is the sequence id the next packet (read or written) must carry.  Writes are
    queued by :meth:`queue` and sent by :meth:`flush`, which always drains.
    """

    __slots__ = (
        "_out",
        "_protocol",
        "max_payload",
        "read_timeout",
        "seq",
        "write_timeout",
    )

    def __init__(
        self,
        protocol: PacketProtocol,
        *,
        max_payload: int,
        read_timeout: float,
        write_timeout: float,
    ) -> None:
        self._protocol = protocol
        self.max_payload = max_payload
        self._out: list[bytes] = []
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.seq = 0

    @property
    def peer(self) -> tuple[str, int] | None:
        """The client's address, if the transport knows it."""
        transport = self._protocol.transport
        name = transport.get_extra_info("peername") if transport is not None else None
        if isinstance(name, tuple) and len(name) >= 2:
            return str(name[0]), int(name[1])
        return None

    async def read(self, timeout: float | None, *, command: bool = False) -> bytes:
        """The next logical packet's payload (``command``: a command packet, whose sequence
        id restarts at 0).

        ``timeout`` bounds the wait for its first header (``None``: no bound); the rest of the
        packet must follow within ``read_timeout``.  Raises :class:`PeerClosed` on a clean
        close before the header, :class:`TimeoutError`, the :class:`OSError` the connection
        was lost with, or :class:`RemoteProtocolError` (:class:`PacketTooLarge`,
        :class:`PacketsOutOfOrder`, truncated packet).
        """
        if command:
            self.seq = 0
        buffer = self._protocol.buffer
        if len(buffer) < HEADER_SIZE:
            await self._wait(HEADER_SIZE, None if timeout is None else self._now() + timeout)
            self._require(HEADER_SIZE, first=True, header=True)
        header = self._take_header()
        deadline: float | None = None  # read_timeout from the first wait on
        parts: list[bytes] = []
        size = 0
        while True:
            length = self._check(header, size)
            if len(buffer) < length:
                deadline = self._deadline(deadline)
                await self._wait(length, deadline)
                self._require(length, first=False, header=False)
            chunk = bytes(buffer[:length])
            del buffer[:length]
            parts.append(chunk)
            size += length
            if length < MAX_PACKET_PAYLOAD:
                self._protocol.consumed()
                return chunk if len(parts) == 1 else b"".join(parts)
            if len(buffer) < HEADER_SIZE:
                deadline = self._deadline(deadline)
                await self._wait(HEADER_SIZE, deadline)
                self._require(HEADER_SIZE, first=False, header=True)
            header = self._take_header()

    def _now(self) -> float:
        return self._protocol.loop.time()

    def _deadline(self, deadline: float | None) -> float:
        if deadline is None:
            return self._now() + self.read_timeout
        return deadline

    def _take_header(self) -> int:
        buffer = self._protocol.buffer
        word: int = _HEADER.unpack_from(buffer)[0]
        del buffer[:HEADER_SIZE]
        return word

    def _require(self, size: int, *, first: bool, header: bool) -> None:
        """After a wait: the buffer holds ``size`` bytes, or the connection ended and this
        says how."""
        protocol = self._protocol
        if len(protocol.buffer) >= size:
            return
        lost = protocol.lost
        if isinstance(lost, OSError):
            raise lost
        if first and not protocol.buffer:
            raise PeerClosed("the client closed the connection")
        if header:
            raise RemoteProtocolError("connection closed inside a packet header")
        raise RemoteProtocolError("connection closed inside a packet")

    async def _wait(self, size: int, deadline: float | None) -> None:
        protocol = self._protocol
        waiter = protocol.want(size, deadline)
        if waiter is not None:
            try:
                await waiter
            finally:
                protocol.unwant()

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
        protocol = self._protocol
        transport = protocol.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("connection lost")
        transport.write(data)
        if not protocol.writing_paused:
            return  # the socket took it, or the transport buffers it below its high water
        async with asyncio.timeout(self.write_timeout):
            await protocol.drain()

    async def send(self, *payloads: bytes) -> None:
        """Queue ``payloads`` and flush."""
        self.queue_all(payloads)
        await self.flush()

    async def discard(self, limit: int, timeout: float) -> None:
        """Read and drop up to ``limit`` bytes (or until EOF or ``timeout``).

        Used before closing on an oversized packet: a socket closed with unread data sends a
        reset, which can destroy the ERR packet in flight to the client.
        """
        protocol = self._protocol
        buffer = protocol.buffer
        deadline = self._now() + timeout
        with contextlib.suppress(TimeoutError, OSError):
            while limit > 0:
                if not buffer:
                    await self._wait(1, deadline)
                    if not buffer:
                        return
                taken = min(limit, len(buffer))
                del buffer[:taken]
                limit -= taken
                protocol.consumed()

    def abort_reads(self) -> None:
        """Close the transport so that a pending :meth:`read` ends with :class:`PeerClosed`;
        used to close an idle connection from outside its task."""
        transport = self._protocol.transport
        if transport is not None:
            transport.close()

    async def close(self, timeout: float) -> None:
        """Close the transport and wait (at most ``timeout``) until it is closed."""
        self._out.clear()
        self.abort_reads()
        # The peer may already be gone; the transport is closed either way.
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(timeout):
                await self._protocol.wait_gone()
