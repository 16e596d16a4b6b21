"""Packet framing: the 4-byte header (3-byte payload length, 1-byte sequence id) and the
splitting of payloads of 16 MiB - 1 bytes and more into several packets.

A payload of ``0xFFFFFF`` bytes or more is sent as full ``0xFFFFFF``-byte packets followed by
one shorter packet; when the length is an exact multiple of ``0xFFFFFF`` that last packet is
empty, so the receiver knows the payload ended.  Sequence ids keep counting (mod 256) across
the pieces.

https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basic_packets.html
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from consistent.errors import LocalProtocolError, RemoteProtocolError
from consistent.protocol.constants import MAX_PACKET_PAYLOAD

__all__ = [
    "DEFAULT_MAX_PAYLOAD",
    "HEADER_SIZE",
    "Packet",
    "PacketDecoder",
    "frame_packet",
    "frame_packets",
]

HEADER_SIZE: Final = 4
DEFAULT_MAX_PAYLOAD: Final = 64 * 1024 * 1024
"""Default bound of one logical payload: mysqld 8.0's default ``max_allowed_packet``."""

_HEADER: Final = struct.Struct("<I")
_FULL_HEADERS: Final = tuple(_HEADER.pack(MAX_PACKET_PAYLOAD | seq << 24) for seq in range(256))


@dataclass(frozen=True, slots=True)
class Packet:
    """One logical packet: its payload (continuation packets joined) and the sequence id of its
    first physical packet.  ``fragments`` counts the physical packets it arrived in, so the
    sequence id the answer must use is :attr:`next_seq`."""

    seq: int
    payload: bytes
    fragments: int = 1

    @property
    def next_seq(self) -> int:
        """Sequence id that follows this packet's last physical packet."""
        return (self.seq + self.fragments) & 0xFF


def _check_seq(seq: int) -> None:
    if not 0 <= seq <= 0xFF:
        raise LocalProtocolError(f"sequence id out of range: {seq}")


def frame_packet(payload: bytes | bytearray | memoryview, seq: int) -> bytes:
    """Frame a payload that fits in one physical packet (fewer than ``0xFFFFFF`` bytes).

    Use :func:`frame_packets` when the payload may be longer.
    """
    _check_seq(seq)
    n = len(payload)
    if n >= MAX_PACKET_PAYLOAD:
        raise LocalProtocolError(f"payload of {n} bytes needs several packets; use frame_packets()")
    return _HEADER.pack(n | seq << 24) + payload


def frame_packets(payload: bytes | bytearray | memoryview, seq: int) -> tuple[bytes, int]:
    """Frame a payload of any length; returns the wire bytes and the next sequence id."""
    _check_seq(seq)
    n = len(payload)
    if n < MAX_PACKET_PAYLOAD:
        return _HEADER.pack(n | seq << 24) + payload, (seq + 1) & 0xFF
    view = memoryview(payload)
    parts: list[bytes | memoryview] = []
    pos = 0
    while n - pos >= MAX_PACKET_PAYLOAD:
        parts.append(_FULL_HEADERS[seq])
        parts.append(view[pos : pos + MAX_PACKET_PAYLOAD])
        pos += MAX_PACKET_PAYLOAD
        seq = (seq + 1) & 0xFF
    # The terminating short packet; empty when n is a multiple of MAX_PACKET_PAYLOAD.
    parts.append(_HEADER.pack((n - pos) | seq << 24))
    parts.append(view[pos:])
    return b"".join(parts), (seq + 1) & 0xFF


class PacketDecoder:
    """Incremental decoder: feed it whatever the socket returned, get back whole packets.

    Continuation packets are joined into one :class:`Packet`; their sequence ids must follow
    each other.  ``max_payload`` bounds the logical payload size, and so the buffered bytes:
    a peer that announces more raises :class:`RemoteProtocolError` before anything is buffered.
    """

    __slots__ = ("_buf", "_first_seq", "_fragments", "_max_payload", "_parts", "_size")

    def __init__(self, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        if max_payload < 0:
            raise LocalProtocolError(f"max_payload must be >= 0, got {max_payload}")
        self._max_payload = max_payload
        self._buf = bytearray()
        self._parts: list[bytes] = []
        self._first_seq = 0
        self._fragments = 0
        self._size = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as packets (headers included)."""
        return len(self._buf) + self._size + HEADER_SIZE * self._fragments

    @property
    def in_packet(self) -> bool:
        """Whether a packet has been started and not finished (part of it is buffered)."""
        return bool(self._buf) or self._fragments > 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[Packet]:
        """Add received bytes; return the packets they completed, in order."""
        buf = self._buf
        buf += data
        out: list[Packet] = []
        end = len(buf)
        pos = 0
        unpack = _HEADER.unpack_from
        with memoryview(buf) as view:  # released before the buffer is trimmed below
            while end - pos >= HEADER_SIZE:
                word: int = unpack(view, pos)[0]
                length = word & 0xFFFFFF
                seq = word >> 24
                if self._fragments:
                    self._check_continuation(seq, length)
                elif length > self._max_payload:
                    raise RemoteProtocolError(f"packet payload exceeds {self._max_payload} bytes")
                start = pos + HEADER_SIZE
                if end - start < length:
                    break
                pos = start + length
                if length == MAX_PACKET_PAYLOAD:
                    if not self._fragments:
                        self._first_seq = seq
                    self._parts.append(bytes(view[start:pos]))
                    self._fragments += 1
                    self._size += length
                elif self._fragments:
                    self._parts.append(bytes(view[start:pos]))
                    out.append(Packet(self._first_seq, b"".join(self._parts), self._fragments + 1))
                    self._parts = []
                    self._fragments = 0
                    self._size = 0
                else:
                    out.append(Packet(seq, bytes(view[start:pos])))
        if pos:
            del buf[:pos]
        return out

    def _check_continuation(self, seq: int, length: int) -> None:
        expected = (self._first_seq + self._fragments) & 0xFF
        if seq != expected:
            raise RemoteProtocolError(
                f"continuation packet has sequence id {seq}, expected {expected}"
            )
        if self._size + length > self._max_payload:
            raise RemoteProtocolError(f"packet payload exceeds {self._max_payload} bytes")
